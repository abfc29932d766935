"""Ports for listeners the local stack (and the tests) choose themselves.

A port the kernel hands out for `bind(0)` comes from its ephemeral range
(`/proc/sys/net/ipv4/ip_local_port_range`, 32768-60999 on Linux): the same range every
outgoing TCP connection takes its local port from. A listener chosen there and bound later
(the REST ingress after Kafka and Spark have started, a broker restarted in place on its
last port) can find the port taken by some client's connection in between: "address
already in use", by chance. So ports are chosen below that range, where only listeners live,
and the kernel's choice is the fallback.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port", "port_is_free"]

#: Where the kernel's ephemeral range is read from (Linux); elsewhere the usual default.
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
DEFAULT_EPHEMERAL_LOW = 32768
#: The lowest port chosen: above the well-known and most registered services' ports.
LOWEST = 20000
ATTEMPTS = 200


def ephemeral_low() -> int:
    """Return the first port of the kernel's ephemeral range."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return DEFAULT_EPHEMERAL_LOW


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """Return True if `port` can be bound on `host`."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
        return True


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on `host` that nothing listens on now, below the ephemeral range."""
    choose = random.SystemRandom()
    high = ephemeral_low() - 1
    if high > LOWEST:
        for _ in range(ATTEMPTS):
            port = choose.randint(LOWEST, high)
            if port_is_free(port, host):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
