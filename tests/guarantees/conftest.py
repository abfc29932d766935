"""Fixtures of the guarantee tests: brokers of their own, which the tests kill."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from coordinator.runtime.local_stack.ports import free_port
from tests.conftest import unavailable


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[KafkaBroker]:
    """A broker of this test's own (it gets killed), on fixed ports so restarts keep them."""
    settings = BrokerSettings(
        data_dir=tmp_path / "kafka", port=free_port(), controller_port=free_port()
    )
    own = KafkaBroker(settings)
    try:
        own.start()
    except Exception as exc:
        unavailable("Kafka", exc)
    try:
        yield own
    finally:
        own.stop()
