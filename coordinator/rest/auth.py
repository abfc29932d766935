"""Who is calling: bearer tokens from the auth file, and what each may do.

The file (config key `rest.auth_file`) is TOML. Each token names its rights, as RocketMQ's
ACL grants Pub and Sub per topic and group; producer and consumer groups are two namespaces::

    [[token]]
    group = "orders"                         # produce: act for producer group orders
    sha256 = "<hex sha256 of the token>"     # or: token = "<plaintext>" (discouraged)

    [[token]]
    name = "ledger"                          # optional: how logs call this caller
    sha256 = "..."
    [[token.consume]]                        # consume: as consumer group ledger ...
    group = "ledger"
    topics = ["OrderPaid", "Refunds"]        # ... on these topics only ("*": every topic)

    [[token]]
    admin = true                             # every group, every topic, operator ops
    name = "ops-oncall"
    sha256 = "..."

    [[token]]
    metrics = true                           # read /metrics (rest.metrics_token_required)
    name = "prometheus"
    sha256 = "..."

A token may act only for its own producer group (contract 5.1): 401 without a valid token, 403
for another group's transactions and check requests. It consumes only as the consumer groups
its `[[token.consume]]` entries name, on their topics: a producer token consumes nothing,
and is not the consumer group of its own name (else one producer reads every other
producer's messages, and joins any consumer group named like it). A token may hold both
rights; the 403 of a right not held names the grant to add. With
`rest.metrics_token_required`, /metrics needs a token with `metrics = true` (a scraper's
right, nothing else) or an admin's. An admin token
may act for every group, consume as every group, and is the only one that may send an
operator's op. The producer instance ids a token names are its own (instance_ids.py).
Without a file the API is in open mode: every caller acts as admin, so it must
listen on loopback only (`require_safe_listen`). Only digests are kept; a presented token is
hashed and compared with every digest with hmac.compare_digest, so neither timing nor logs
reveal tokens.

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
import logging
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator.core import listen_safety
from coordinator.core.config import RestConfig
from coordinator.core.errors import ConfigurationError
from coordinator.core.secret_files import private_file_problem
from coordinator.protocol import ingress as fmt
from coordinator.protocol.names import topic_name_problem
from coordinator.rest.errors import ApiError

log = logging.getLogger("txcoord.rest.auth")

#: Shortest token accepted (a plaintext entry of the file; digests cannot be measured).
MIN_TOKEN_LENGTH = 16
#: In a consume grant's topics: every topic, those made later included.
EVERY_TOPIC = "*"
_GROUP = re.compile(fmt.GROUP_PATTERN)
_HEX_DIGEST = re.compile(r"[0-9a-fA-F]{64}")
_ENTRY_KEYS = frozenset({"group", "admin", "sha256", "token", "name", "consume", "metrics"})
_CONSUME_KEYS = frozenset({"group", "topics"})
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="txcoord"'}


@dataclass(frozen=True)
class ConsumeGrant:
    """The right to consume as consumer group `group` on `topics` (EVERY_TOPIC: all)."""

    group: str
    topics: frozenset[str]

    def covers(self, topic: str) -> bool:
        """Return True if this grant lets its group consume `topic`."""
        return EVERY_TOPIC in self.topics or topic in self.topics


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: the producer group it acts for (if any), the consumer groups
    and topics it may consume, whether it may read /metrics, or an admin (all of them)."""

    group: str | None
    admin: bool
    name: str
    consume: tuple[ConsumeGrant, ...] = ()
    #: May read /metrics when rest.metrics_token_required (every consumer group and topic
    #: is named there): a scraper's right, apart from producing and consuming.
    metrics: bool = False
    #: The namespace of the producer instance ids this caller names (instance_ids.py): a
    #: digest of its token, so no other token can name the same instance; "" in open mode,
    #: where instance ids are hints. Not a right: principals compare by their rights.
    instance_namespace: str = field(default="", compare=False)

    def may_read_metrics(self) -> bool:
        """Return True if this caller may read /metrics."""
        return self.admin or self.metrics

    def may_act_for(self, group: str) -> bool:
        """Return True if this caller may act for producer group `group`."""
        return self.admin or self.group == group

    def consume_grant(self, group: str) -> ConsumeGrant | None:
        """Return this caller's grant for consumer group `group`, or None."""
        return next((grant for grant in self.consume if grant.group == group), None)

    def may_consume(self, group: str, topic: str | None = None) -> bool:
        """Return True if this caller may consume as consumer group `group` on `topic`
        (None: on some topic; an ack names no topic)."""
        if self.admin:
            return True
        grant = self.consume_grant(group)
        return grant is not None and (topic is None or grant.covers(topic))


OPEN_MODE = Principal(group=None, admin=True, name="open mode")


@dataclass(frozen=True)
class TokenEntry:
    """One token of the auth file: the sha256 of the secret and who it stands for."""

    digest: bytes
    principal: Principal


def sha256_hex(token: str) -> str:
    """Return the hex sha256 of `token`, as the auth file stores it."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def instance_namespace(digest: bytes) -> str:
    """Return the namespace of the producer instance ids of the token whose sha256 is
    `digest`: 12 hex digits of a digest of it, which say nothing of the token."""
    return hashlib.sha256(b"txcoord producer instance\0" + digest).hexdigest()[:12]


def _grant(raw: Any, label: str) -> ConsumeGrant:
    """Return one [[token.consume]] entry, or raise ConfigurationError naming it."""
    if not isinstance(raw, Mapping):
        raise ConfigurationError(f"{label} must be a table ([[token.consume]])")
    unknown = sorted(set(raw) - _CONSUME_KEYS)
    if unknown:
        raise ConfigurationError(
            f"{label} has unknown key(s) {', '.join(unknown)}; known: group, topics"
        )
    group, topics = raw.get("group"), raw.get("topics")
    if not (isinstance(group, str) and _GROUP.fullmatch(group)):
        raise ConfigurationError(
            f"{label}: group (a consumer group) must match {fmt.GROUP_PATTERN}"
        )
    if not (isinstance(topics, list) and topics):
        raise ConfigurationError(
            f'{label}: topics must be a non-empty list of topic names (["*"]: every topic)'
        )
    for topic in topics:
        if topic != EVERY_TOPIC and (problem := topic_name_problem(topic)):
            raise ConfigurationError(f"{label}: topics: {problem}")
    return ConsumeGrant(group, frozenset(topics))


def _grants(raw: Any, label: str) -> tuple[ConsumeGrant, ...]:
    """Return the consume grants of one token, each consumer group once."""
    if not isinstance(raw, list) or not raw:
        raise ConfigurationError(
            f"{label}: consume must be [[token.consume]] tables, each a group and its topics"
        )
    grants = tuple(_grant(item, f"{label}: consume #{i + 1}") for i, item in enumerate(raw))
    seen: set[str] = set()
    for grant in grants:
        if grant.group in seen:  # one place per group, so a reader sees all its topics at once
            raise ConfigurationError(
                f"{label}: consumer group {grant.group!r} is granted twice; list its topics "
                "in one [[token.consume]]"
            )
        seen.add(grant.group)
    return grants


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
    metrics = raw.get("metrics", False)
    if not isinstance(admin, bool):
        raise ConfigurationError(f"{label}: admin must be true or false")
    if not isinstance(metrics, bool):
        raise ConfigurationError(f"{label}: metrics must be true or false")
    if admin and (group is not None or "consume" in raw or "metrics" in raw):
        raise ConfigurationError(
            f"{label}: an admin token acts for every group, consumes every topic and reads "
            "/metrics; drop its group and consume, and metrics"
        )
    if not admin and group is None and "consume" not in raw and not metrics:
        raise ConfigurationError(
            f"{label} needs a right: group (the producer group it acts for), "
            "[[token.consume]] (consumer groups and their topics), metrics = true (read "
            "/metrics), or admin = true"
        )
    if group is not None and not (isinstance(group, str) and _GROUP.fullmatch(group)):
        raise ConfigurationError(f"{label}: group must match {fmt.GROUP_PATTERN}")
    consume = _grants(raw["consume"], label) if "consume" in raw else ()
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
    name = raw.get("name", _default_name(admin, group, consume, metrics))
    if not isinstance(name, str):
        raise ConfigurationError(f"{label}: name must be a string")
    principal = Principal(
        group=group,
        admin=admin,
        name=name,
        consume=consume,
        metrics=metrics,
        instance_namespace=instance_namespace(bytes.fromhex(digest)),
    )
    return TokenEntry(bytes.fromhex(digest), principal)


def _default_name(
    admin: bool, group: str | None, consume: tuple[ConsumeGrant, ...], metrics: bool
) -> str:
    if admin:
        return "admin"
    if group is not None:
        return f"group {group}"
    if consume:
        return f"consumer group {', '.join(grant.group for grant in consume)}"
    return "metrics" if metrics else "no right"


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
    if not any(e.principal.admin or e.principal.consume for e in entries):
        # A file written before consume grants: its producer tokens no longer consume.
        log.info(
            "rest.auth_file %s grants no consumer group: only admin tokens may receive "
            "(a producer group's token is not the consumer group of its name; grant one "
            "with [[token.consume]])",
            path,
        )
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


def require_safe_listen(auth: Authenticator, rest: RestConfig) -> None:
    """Refuse to listen where a caller's secrets or powers would reach others
    (coordinator/core/listen_safety.py): open mode on loopback only; beyond loopback the
    ingress serves TLS (`rest.tls_certfile`), or is declared to sit behind a proxy that
    does (`rest.behind_tls_proxy`)."""
    listen_safety.require_safe_listen(
        listen_safety.Listener(
            server="the REST ingress",
            host_setting="rest.host",
            host=rest.host,
            open_mode=auth.open_mode,
            secured=bool(rest.tls_certfile or rest.behind_tls_proxy),
            in_clear="bearer tokens over plain HTTP",
            secure_with="set rest.tls_certfile and rest.tls_keyfile (PEM) to serve TLS, or "
            "rest.behind_tls_proxy = true when a proxy in front of it terminates TLS",
        )
    )


def require_group(principal: Principal, group: str, what: str) -> None:
    """Raise a 403 ApiError unless `principal` may act for producer group `group`."""
    if not principal.may_act_for(group):
        acts_for = (
            f"acts for producer group {principal.group!r}"
            if principal.group is not None
            else "acts for no producer group"
        )
        raise ApiError(403, "forbidden", f"{what}: this token {acts_for}, not {group!r}")


def require_consume(
    principal: Principal,
    group: str,
    topic: str | None,
    fields: tuple[str, str] = ("group", "topic"),
) -> None:
    """Raise a 403 ApiError unless `principal` may consume as consumer group `group` on
    `topic` (None: on some topic); `fields` name the group and the topic in the request.

    The message names the grant the auth file lacks, so an operator whose consumer worked
    before consume grants existed knows what to add."""
    if principal.may_consume(group, topic):
        return
    group_field, topic_field = fields
    token = f"token {principal.name!r}"
    grant = principal.consume_grant(group)
    if grant is None or topic is None:
        on = f" on topic {topic!r}" if topic is not None else ""
        topics = f'"{topic}"' if topic is not None else '"<topic>", ...'
        message = (
            f"{group_field}: {token} may not consume as consumer group {group!r}{on}; to "
            f'allow it, add to that token in the auth file: [[token.consume]] group = "{group}" '
            f"topics = [{topics}]"
        )
        if principal.group == group:
            message += (
                " (a producer group's token is not the consumer group of the same name: "
                "the two are granted apart)"
            )
    else:
        granted = ", ".join(repr(t) for t in sorted(grant.topics))
        message = (
            f"{topic_field}: {token} may consume as consumer group {group!r} on {granted} "
            f'only, not {topic!r}; to allow it, add "{topic}" to the topics of its '
            f'[[token.consume]] group = "{group}" in the auth file'
        )
    raise ApiError(403, "forbidden", message)


def require_metrics(principal: Principal) -> None:
    """Raise a 403 ApiError unless `principal` may read /metrics."""
    if not principal.may_read_metrics():
        raise ApiError(
            403,
            "forbidden",
            f"/metrics: token {principal.name!r} may not read the metrics "
            "(rest.metrics_token_required); a scraper's token has metrics = true in the "
            "auth file",
        )


def require_admin(principal: Principal, what: str) -> None:
    """Raise a 403 ApiError unless `principal` is an admin."""
    if not principal.admin:
        raise ApiError(403, "forbidden", f"{what} needs an admin token")
