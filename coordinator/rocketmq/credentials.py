"""Who is calling: RocketMQ 5 credentials, checked against the REST ingress's auth file.

A RocketMQ 5 client signs every call (rocketmq-client's Signature, the Java client's alike)
into gRPC metadata::

    x-mq-date-time: 20261206T110000Z
    authorization:  MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time,
                    Signature=<hex HMAC-SHA1 of the date-time, keyed with the secret key>

Here the access key names a `[[token]]` of `rest.auth_file` (its `name`) and the secret key is
that token's hex sha256, the very string the entry stores (`sha256 = "..."`, or the sha256 of
its `token`): an HMAC is checked with the key, so the server must hold it, as RocketMQ's ACL
keeps its secret keys, and the auth file holds only digests. The caller then has the
token's rights (coordinator/rest/auth.py): produce for its producer group, consume as its
consumer groups, admin. Signatures are compared in constant time with every entry of that
name. The date-time is signed, not checked for freshness: the Python client writes its
local time with a `Z`, and RocketMQ's proxy does not check it either; TLS keeps a signature
from being replayed by someone on the path.

Without an auth file the endpoint is open (every caller an admin), on loopback only, as the
REST ingress is.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from coordinator.core import listen_safety
from coordinator.core.config import Config
from coordinator.rest.auth import OPEN_MODE, Principal, TokenEntry, load_token_file
from coordinator.rocketmq.codes import Code, RefusedError

__all__ = ["Credentials", "require_safe_listen", "sign"]

ALGORITHM = "MQv2-HMAC-SHA1"
DATE_TIME = "x-mq-date-time"
AUTHORIZATION = "authorization"
CLIENT_ID = "x-mq-client-id"
_FIELDS = re.compile(r"\s*(Credential|SignedHeaders|Signature)=([^,]*)\s*(?:,|$)")


def sign(secret_key: str, date_time: str) -> str:
    """Return the hex HMAC-SHA1 of `date_time` keyed with `secret_key` (the client's rule)."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).hexdigest()


def metadata_value(metadata: Iterable[tuple[str, str | bytes]], name: str) -> str | None:
    """Return the first value of metadata key `name` as text, or None."""
    for key, value in metadata:
        if key == name:
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return None


class Credentials:
    """Turn a call's metadata into a Principal; open mode when built without entries."""

    def __init__(self, entries: Sequence[TokenEntry] | None) -> None:
        self._entries = None if entries is None else list(entries)

    @classmethod
    def of(cls, config: Config) -> Credentials:
        """Return the credentials of `rest.auth_file` ("" = open mode)."""
        auth_file = config.rest.auth_file
        return cls(load_token_file(Path(auth_file)) if auth_file else None)

    @property
    def open_mode(self) -> bool:
        """Return True if every caller is trusted (no auth file)."""
        return self._entries is None

    def authenticate(self, metadata: Iterable[tuple[str, str | bytes]]) -> Principal:
        """Return who signed the call; raise RefusedError(UNAUTHORIZED) if nobody did."""
        if self._entries is None:
            return OPEN_MODE
        pairs = list(metadata)
        header = metadata_value(pairs, AUTHORIZATION)
        date_time = metadata_value(pairs, DATE_TIME)
        if not header or not date_time:
            raise RefusedError(
                Code.UNAUTHORIZED,
                "sign the call: set the client's credentials (access key: the token's name "
                "in the auth file, secret key: its sha256)",
            )
        algorithm, _, rest = header.strip().partition(" ")
        fields = dict(_FIELDS.findall(rest))
        access_key, signature = fields.get("Credential"), fields.get("Signature", "")
        if (
            algorithm != ALGORITHM
            or not access_key
            or DATE_TIME not in fields.get("SignedHeaders", "")
        ):
            raise RefusedError(
                Code.UNAUTHORIZED, f"the authorization is not {ALGORITHM} over {DATE_TIME}"
            )
        found: Principal | None = None
        for entry in self._entries:  # no early exit: every entry of the name is compared
            expected = sign(entry.digest.hex(), date_time)
            named = hmac.compare_digest(entry.principal.name.encode(), access_key.encode())
            # Hex in either case: the Python client writes lowercase, the Java client uppercase.
            given = signature.strip().lower().encode()
            if hmac.compare_digest(expected.encode(), given) and named:
                found = entry.principal
        if found is None:
            raise RefusedError(
                Code.UNAUTHORIZED, f"the signature of access key {access_key!r} is not valid"
            )
        return found


def require_safe_listen(credentials: Credentials, config: Config) -> None:
    """Refuse to listen where open mode's powers or signatures in clear would reach others
    (coordinator/core/listen_safety.py): open mode on loopback only; beyond loopback the
    endpoint serves TLS (`grpc.tls_certfile`), or a signature sent in clear is anyone's on
    the path to replay."""
    listen_safety.require_safe_listen(
        listen_safety.Listener(
            server="the RocketMQ gRPC endpoint",
            host_setting="grpc.host",
            host=config.grpc.host,
            open_mode=credentials.open_mode,
            secured=bool(config.grpc.tls_certfile),
            in_clear="signed calls over plain gRPC",
            secure_with="set grpc.tls_certfile and grpc.tls_keyfile (PEM) to serve TLS",
        )
    )
