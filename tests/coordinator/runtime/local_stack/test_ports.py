"""Ports the stack chooses for its listeners lie below the kernel's ephemeral range."""

from __future__ import annotations

import socket

import pytest

from coordinator.runtime.local_stack import ports


def test_a_chosen_port_is_free_and_below_the_ephemeral_range() -> None:
    low = ports.ephemeral_low()
    for _ in range(20):
        port = ports.free_port()
        assert ports.LOWEST <= port < low, (port, low)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            # Really free for a listener: bound as every listener of the stack binds (the
            # JVM's server sockets, uvicorn and gRPC set SO_REUSEADDR on Linux). Without it
            # a port whose last connection is in TIME_WAIT (a listener of another test
            # closed it moments ago) refuses the bind: the gate's run of b1fe547 failed so,
            # a test stricter than any listener, not a port a listener could not take.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", port))
            sock.listen()


def test_a_port_in_use_is_not_chosen() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        assert not ports.port_is_free(taken)


def test_without_room_below_the_range_the_kernel_chooses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ports, "ephemeral_low", lambda: ports.LOWEST)
    port = ports.free_port()
    assert ports.port_is_free(port)
