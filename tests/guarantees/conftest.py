"""Fixtures of the guarantee tests: brokers of their own, which the tests kill."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from coordinator.runtime.local_stack.ports import free_port
from tests.conftest import unavailable
from tests.guarantees import app_runs


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


@pytest.fixture(autouse=True)
def app_runs_journal(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hand this test's application starts and unplanned exits to its report (the gate's
    summary prints them: tests/gate_budget.py)."""
    app_runs.JOURNAL.clear()
    yield
    if app_runs.JOURNAL:
        request.node.user_properties.append(("app_runs", list(app_runs.JOURNAL)))
        app_runs.JOURNAL.clear()
