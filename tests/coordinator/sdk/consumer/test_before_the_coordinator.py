"""A consumer started before the coordinator ever ran: a clear error, at once, and no topic
created behind the coordinator's back (a broker that creates topics on first use would make
the offsets topic uncompacted)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from coordinator.kafka_clients.admin import admin_client
from coordinator.sdk.consumer import SimpleConsumer

pytestmark = pytest.mark.kafka


def test_a_clear_error_and_no_topic_created(bootstrap_servers: str, tmp_path: Path) -> None:
    suffix = uuid.uuid4().hex[:8]
    consumer = SimpleConsumer(
        "early",
        ["OrderPaid"],
        bootstrap_servers=bootstrap_servers,
        warehouse=str(tmp_path / "warehouse"),
        deliveries_topic=f"deliveries-{suffix}",
        offsets_topic=f"offsets-{suffix}",
    )
    started = time.monotonic()
    with pytest.raises(ValueError, match="does not exist: start the coordinator first"):
        consumer.start()
    assert time.monotonic() - started < 30
    with admin_client(bootstrap_servers) as admin:
        assert not {f"deliveries-{suffix}", f"offsets-{suffix}"} & set(admin.list_topics())


def test_per_group_a_consumer_group_without_its_offsets_topic_is_told_how_to_make_it(
    bootstrap_servers: str, tmp_path: Path
) -> None:
    """In the per-group layout nobody makes a group's offsets topic by writing to it: the
    error names the command that makes it, and the consumer made none."""
    suffix = uuid.uuid4().hex[:8]
    consumer = SimpleConsumer(
        "early",
        ["OrderPaid"],
        bootstrap_servers=bootstrap_servers,
        warehouse=str(tmp_path / "warehouse"),
        deliveries_topic=f"deliveries-{suffix}",
        offsets_topic=f"offsets-{suffix}",
        topics_per_group=True,
    )
    with pytest.raises(ValueError, match="txcoord provision --consumer-group early"):
        consumer.start()
    with admin_client(bootstrap_servers) as admin:
        assert f"offsets-{suffix}.early" not in set(admin.list_topics())
