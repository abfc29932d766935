"""The one transient kafka-python ERROR is logged as a WARNING; every other record is untouched."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator

import kafka.cluster
import pytest

from coordinator.core.library_logs import TRANSIENT, demote_transient_library_errors


@pytest.fixture(autouse=True)
def _clean_filters() -> Iterator[None]:
    logger = logging.getLogger("kafka.cluster")
    kept = list(logger.filters)
    yield
    logger.filters[:] = kept


def test_the_demoted_message_is_still_what_kafka_python_logs() -> None:
    """If kafka-python rewords the record, the demotion would silently stop: say so here."""
    for name, prefix in TRANSIENT:
        assert name == kafka.cluster.log.name
        assert f"log.error('{prefix}" in inspect.getsource(kafka.cluster)


def test_a_failed_metadata_refresh_is_a_warning_and_other_errors_stay_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    demote_transient_library_errors()
    demote_transient_library_errors()  # once, however often called
    logger = logging.getLogger("kafka.cluster")
    assert len(logger.filters) >= 1
    with caplog.at_level(logging.DEBUG, logger="kafka"):
        logger.error("Metadata refresh: failed %s", RuntimeError("Transport closed for writes"))
        logger.error("Metadata refresh loop error: %s", "boom")
        logging.getLogger("kafka.conn").error("Metadata refresh: failed %s", "elsewhere")
    levels = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert levels == [
        ("kafka.cluster", "WARNING", "Metadata refresh: failed Transport closed for writes"),
        ("kafka.cluster", "ERROR", "Metadata refresh loop error: boom"),
        ("kafka.conn", "ERROR", "Metadata refresh: failed elsewhere"),
    ]
