"""The one transient kafka-python ERROR is logged as a WARNING; every other record is untouched."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Iterator

import kafka.cluster
import kafka.net.selector
import pytest

from coordinator.core.library_logs import (
    CLOSED_SOCKET,
    TASK_FAILED,
    TASK_LOGGER,
    TRANSIENT,
    demote_transient_library_errors,
)


@pytest.fixture(autouse=True)
def _clean_filters() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in ("kafka.cluster", TASK_LOGGER)]
    kept = [list(logger.filters) for logger in loggers]
    yield
    for logger, filters in zip(loggers, kept, strict=True):
        logger.filters[:] = filters


def test_the_demoted_message_is_still_what_kafka_python_logs() -> None:
    """If kafka-python rewords the record, the demotion would silently stop: say so here."""
    for name, prefix in TRANSIENT:
        assert name == kafka.cluster.log.name
        assert f"log.error('{prefix}" in inspect.getsource(kafka.cluster)
    assert kafka.net.selector.log.name == TASK_LOGGER
    assert f"log.exception('{TASK_FAILED} %s:'" in inspect.getsource(kafka.net.selector)


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


def fail_with(error: BaseException) -> None:
    """Log `error` as kafka-python's event loop logs a task that raised it."""
    try:
        raise error
    except BaseException:
        logging.getLogger(TASK_LOGGER).exception(f"{TASK_FAILED} %s:", "<Task 1>")


def test_a_read_on_a_closed_connection_is_a_one_line_warning_and_other_task_errors_stay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    demote_transient_library_errors()
    demote_transient_library_errors()  # once, however often called
    with caplog.at_level(logging.DEBUG, logger="kafka"):
        fail_with(ValueError(CLOSED_SOCKET))
        fail_with(ValueError("Invalid file descriptor: 7"))
        fail_with(KeyError("not registered"))
    first, *others = caplog.records
    assert (first.levelname, first.exc_info) == ("WARNING", None)
    assert first.getMessage().startswith(f"{TASK_FAILED} <Task 1>: ValueError: {CLOSED_SOCKET}")
    assert "Traceback" not in caplog.text.split("\n")[0]
    assert [(r.levelname, r.exc_info is not None) for r in others] == [("ERROR", True)] * 2
