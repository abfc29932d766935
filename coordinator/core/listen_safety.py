"""Where a server that takes credentials may listen: the rule the REST ingress
(rest/auth.py) and the RocketMQ gRPC endpoint (rocketmq/credentials.py) share.

Open mode (no auth file: every caller is an admin) listens on loopback only: anyone who
reaches it may act for every producer group. Beyond loopback the server takes credentials
only over TLS, its own or a proxy's in front of it: a bearer token, or a signature, sent in
clear is anyone's on the path. Each server names its own settings in the refusal, so the
message says which one to change.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from coordinator.core.errors import ConfigurationError

__all__ = ["Listener", "is_loopback", "require_safe_listen"]


def is_loopback(host: str) -> bool:
    """Return True if `host` names only this machine: 127.0.0.0/8, ::1 or localhost."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip().strip("[]")).is_loopback
    except ValueError:
        return False  # another host name: it may resolve to anything


@dataclass(frozen=True)
class Listener:
    """A server about to listen, as its refusals name it."""

    #: What it is, e.g. "the REST ingress".
    server: str
    #: The setting of its host, e.g. "rest.host".
    host_setting: str
    host: str
    #: Whether it runs without an auth file (every caller an admin).
    open_mode: bool
    #: Whether its credentials travel over TLS (its own, or a proxy's in front of it).
    secured: bool
    #: What it would take in clear, e.g. "bearer tokens over plain HTTP".
    in_clear: str
    #: How to secure it, e.g. "set rest.tls_certfile and rest.tls_keyfile (PEM) ...".
    secure_with: str


def require_safe_listen(listener: Listener) -> None:
    """Raise ConfigurationError if `listener` would reach beyond this machine in open mode,
    or take credentials in clear beyond it."""
    host, setting = listener.host, listener.host_setting
    if is_loopback(host):
        return
    if listener.open_mode:
        raise ConfigurationError(
            f"{listener.server} in open mode (no rest.auth_file: every caller may act for "
            "every producer group) listens on a loopback address only (127.0.0.0/8, ::1, "
            f"localhost), not {setting}={host!r}: set rest.auth_file to a token file, or "
            f"{setting} to 127.0.0.1"
        )
    if not listener.secured:
        raise ConfigurationError(
            f"{listener.server} on {setting}={host!r} would take {listener.in_clear} beyond "
            f"this machine: {listener.secure_with}"
        )
