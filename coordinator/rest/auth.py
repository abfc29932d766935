"""Who is calling: bearer tokens from the auth file, each bound to one group or admin.

The file (config key `rest.auth_file`) is TOML::

    [[token]]
    group = "orders"
    sha256 = "<hex sha256 of the token>"     # or: token = "<plaintext>" (discouraged)

    [[token]]
    admin = true
    name = "ops-oncall"                      # optional: how logs call this caller
    sha256 = "..."

A token may act only for its own producer group (contract 5.1): 401 without a valid token, 403
for another group's transactions and check requests. An admin token may act for every group
and is the only one that may send an operator's op. Without a file the API is in open mode:
every caller acts as admin, so it must listen on loopback only (`require_safe_listen`).
Only digests are kept; a presented token is hashed and compared with every digest with
hmac.compare_digest, so neither timing nor logs reveal tokens.

Hygiene, refused at start with a message that says how to fix it:

- the file must be readable by its owner only (`mode & 0o077 == 0`: `chmod 600`), as ssh
  demands of a private key: a token file that others may read is a shared secret;
- a token must be at least MIN_TOKEN_LENGTH characters. Only a plaintext `token = ...` entry
  can be measured; a `sha256` entry stores a digest, whose length says nothing about the
  token, so the rule is on whoever makes the token: `python -c "import secrets;
  print(secrets.token_urlsafe(32))"` gives 43 characters, and `sha256_hex` its digest.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coordinator.core.config import RestConfig
from coordinator.core.errors import ConfigurationError
from coordinator.core.secret_files import private_file_problem
from coordinator.protocol import ingress as fmt
from coordinator.rest.errors import ApiError

log = logging.getLogger("txcoord.rest.auth")

#: Shortest token accepted (a plaintext entry of the file; digests cannot be measured).
MIN_TOKEN_LENGTH = 16
_GROUP = re.compile(fmt.GROUP_PATTERN)
_HEX_DIGEST = re.compile(r"[0-9a-fA-F]{64}")
_ENTRY_KEYS = frozenset({"group", "admin", "sha256", "token", "name"})
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="txcoord"'}


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: one producer group, or an admin (every group)."""

    group: str | None
    admin: bool
    name: str

    def may_act_for(self, group: str) -> bool:
        """Return True if this caller may act for producer group `group`."""
        return self.admin or self.group == group


OPEN_MODE = Principal(group=None, admin=True, name="open mode")


@dataclass(frozen=True)
class TokenEntry:
    """One token of the auth file: the sha256 of the secret and who it stands for."""

    digest: bytes
    principal: Principal


def sha256_hex(token: str) -> str:
    """Return the hex sha256 of `token`, as the auth file stores it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _entry(raw: Any, index: int, where: str) -> TokenEntry:
    """Return one [[token]] entry, or raise ConfigurationError naming it."""
    label = f"{where}: token #{index + 1}"
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{label} must be a table ([[token]])")
    unknown = sorted(set(raw) - _ENTRY_KEYS)
    if unknown:
        known = ", ".join(sorted(_ENTRY_KEYS))
        raise ConfigurationError(f"{label} has unknown key(s) {', '.join(unknown)}; known: {known}")
    admin = raw.get("admin", False)
    group = raw.get("group")
    if not isinstance(admin, bool):
        raise ConfigurationError(f"{label}: admin must be true or false")
    if admin == (group is not None):
        raise ConfigurationError(f"{label} needs exactly one of group and admin = true")
    if group is not None and not (isinstance(group, str) and _GROUP.fullmatch(group)):
        raise ConfigurationError(f"{label}: group must match {fmt.GROUP_PATTERN}")
    if ("sha256" in raw) == ("token" in raw):
        raise ConfigurationError(f"{label} needs exactly one of sha256 and token (discouraged)")
    if "sha256" in raw:
        digest = raw["sha256"]
        if not (isinstance(digest, str) and _HEX_DIGEST.fullmatch(digest)):
            raise ConfigurationError(f"{label}: sha256 must be 64 hex digits")
    else:
        token = raw["token"]
        if not (isinstance(token, str) and token.strip()):
            raise ConfigurationError(f"{label}: token must be a non-empty string")
        if len(token) < MIN_TOKEN_LENGTH:
            raise ConfigurationError(
                f"{label}: the token is {len(token)} characters; tokens must be at least "
                f"{MIN_TOKEN_LENGTH} characters (make one with secrets.token_urlsafe(32))"
            )
        log.warning("%s keeps a plaintext token; store its sha256 instead", label)
        digest = sha256_hex(token)
    name = raw.get("name", "admin" if admin else f"group {group}")
    if not isinstance(name, str):
        raise ConfigurationError(f"{label}: name must be a string")
    return TokenEntry(bytes.fromhex(digest), Principal(group=group, admin=admin, name=name))


def _require_private(path: Path) -> None:
    """Refuse an auth file that the group or others may read or write."""
    path.stat()  # an absent file: FileNotFoundError, said in load_token_file's words
    if problem := private_file_problem(path, "rest.auth_file"):
        raise ConfigurationError(problem)


def load_token_file(path: Path) -> list[TokenEntry]:
    """Return the entries of the auth file at `path`, or raise ConfigurationError."""
    try:
        _require_private(Path(path))
        raw = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigurationError(f"rest.auth_file {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"rest.auth_file {path} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"rest.auth_file {path} is not valid TOML: {exc}") from None
    # [kafka]: the local broker's principals, same file
    # (coordinator/runtime/local_stack/broker_auth.py).
    unknown = sorted(set(raw) - {"token", "kafka"})
    if unknown:
        raise ConfigurationError(f"rest.auth_file {path}: unknown key(s) {', '.join(unknown)}")
    tokens = raw.get("token", [])
    if not isinstance(tokens, list) or not tokens:
        raise ConfigurationError(
            f"rest.auth_file {path} defines no [[token]]: every request would be refused "
            "(leave rest.auth_file empty for open mode)"
        )
    entries = [_entry(item, i, str(path)) for i, item in enumerate(tokens)]
    if len({e.digest for e in entries}) < len(entries):
        raise ConfigurationError(f"rest.auth_file {path}: two entries have the same token")
    return entries


class Authenticator:
    """Turn an Authorization header into a Principal; open mode when built without tokens."""

    def __init__(self, entries: Sequence[TokenEntry] | None) -> None:
        self._entries = None if entries is None else list(entries)

    @classmethod
    def from_auth_file(cls, auth_file: str) -> Authenticator:
        """Return the authenticator of config key rest.auth_file ("" = open mode)."""
        return cls(load_token_file(Path(auth_file)) if auth_file else None)

    @property
    def open_mode(self) -> bool:
        """Return True if every caller is trusted (no auth file)."""
        return self._entries is None

    def authenticate(self, token: str | None) -> Principal:
        """Return who presents bearer `token`; raise a 401 ApiError if nobody does."""
        if self._entries is None:
            return OPEN_MODE
        if not token:
            raise ApiError(401, "unauthorized", "send Authorization: Bearer <token>", _CHALLENGE)
        presented = hashlib.sha256(token.encode("utf-8", "surrogateescape")).digest()
        found: Principal | None = None
        for entry in self._entries:  # no early exit: every digest is compared
            if hmac.compare_digest(presented, entry.digest):
                found = entry.principal
        if found is None:
            raise ApiError(401, "unauthorized", "the bearer token is not valid", _CHALLENGE)
        return found


def is_loopback(host: str) -> bool:
    """Return True if `host` names only this machine: 127.0.0.0/8, ::1 or localhost."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # another host name: it may resolve to anything


def require_safe_listen(auth: Authenticator, rest: RestConfig) -> None:
    """Refuse to listen where a caller's secrets or powers would reach others.

    Open mode (no tokens: every caller is admin) listens on loopback only. Beyond loopback
    the ingress serves TLS (`rest.tls_certfile`), or is declared to sit behind a proxy that
    does (`rest.behind_tls_proxy`): a bearer token sent in clear is anyone's on the path.
    """
    host = rest.host
    if auth.open_mode and not is_loopback(host):
        raise ConfigurationError(
            "the REST ingress in open mode (no rest.auth_file: every caller may act for every "
            "producer group) listens on a loopback address only (127.0.0.0/8, ::1, localhost), "
            f"not rest.host={host!r}: set rest.auth_file to a token file, or rest.host to "
            "127.0.0.1"
        )
    if not is_loopback(host) and not (rest.tls_certfile or rest.behind_tls_proxy):
        raise ConfigurationError(
            f"the REST ingress on rest.host={host!r} would take bearer tokens over plain HTTP "
            "beyond this machine: set rest.tls_certfile and rest.tls_keyfile (PEM) to serve "
            "TLS, or rest.behind_tls_proxy = true when a proxy in front of it terminates TLS"
        )


def require_group(principal: Principal, group: str, what: str) -> None:
    """Raise a 403 ApiError unless `principal` may act for producer group `group`."""
    if not principal.may_act_for(group):
        raise ApiError(
            403,
            "forbidden",
            f"{what}: this token acts for producer group {principal.group!r}, not {group!r}",
        )


def require_admin(principal: Principal, what: str) -> None:
    """Raise a 403 ApiError unless `principal` is an admin."""
    if not principal.admin:
        raise ApiError(403, "forbidden", f"{what} needs an admin token")
