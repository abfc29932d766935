"""kafka-python's metadata refresh loop outlives a request sent on a closing connection.

A real broker and a real kafka-python admin client; the one thing faked is the failure: the
client's next metadata request fails as a send on a closing connection does in kafka-python
3.0 (`RuntimeError("Transport closed for writes")`, seen in CI).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from kafka.cluster import ClusterMetadata

from coordinator.kafka_clients.admin import admin_client
from coordinator.kafka_clients.metadata_refresh import install
from coordinator.runtime.local_stack.kafka_broker import KafkaBroker

pytestmark = pytest.mark.kafka


def test_the_refresh_loop_refreshes_again_after_a_send_on_a_closing_connection(
    kafka_broker: KafkaBroker,
) -> None:
    with admin_client(kafka_broker.bootstrap_servers) as admin:
        cluster = admin._client.cluster
        manager = cluster._manager
        # The admin client's own I/O thread drives its refresh loop.
        loop = cluster._refresh_loop_future
        assert loop is not None and not loop.is_done
        real_send, failed = manager.send, []

        def send(request: Any, *args: Any, **kwargs: Any) -> Any:
            if type(request).__name__.startswith("Metadata") and not failed:
                failed.append(request)
                raise RuntimeError("Transport closed for writes")
            return real_send(request, *args, **kwargs)

        manager.send = send
        try:
            before = cluster._last_successful_refresh_ms
            cluster.request_update()
            deadline = time.monotonic() + 15
            while cluster._last_successful_refresh_ms <= before:
                assert time.monotonic() < deadline, (
                    f"no metadata refresh after the failed one (loop done: {loop.is_done})"
                )
                time.sleep(0.05)
        finally:
            del manager.send
        assert failed, "the faked failure never happened"
        assert not loop.is_done  # the same loop, still running


def test_install_wraps_once() -> None:
    install()
    wrapped = ClusterMetadata._do_refresh_metadata
    install()
    assert ClusterMetadata._do_refresh_metadata is wrapped
