"""Topic names become table paths: letters, digits, '_' and '-', never a system name."""

from __future__ import annotations

import pytest

from coordinator.protocol.names import topic_name_problem
from delta_tables.topics import table


@pytest.mark.parametrize(
    "topic", ["OrderPaid", "a", "x" * 127, "with-dash_and_bar", "0", "A", "Payments"]
)
def test_valid_names(topic: str) -> None:
    assert topic_name_problem(topic) is None
    assert table(topic).name == f"topics/{topic}"


@pytest.mark.parametrize(
    "topic",
    [
        "",
        "x" * 128,
        "../escape",
        "a/b",
        "a\\b",
        ".",
        "..",
        "with space",
        "naïve",
        "a.b",
        "a\x00b",
        "/abs",
        "s3a://bucket",
        # delta-rs and object_store percent-decode a path: each of these addressed another.
        "%41",
        "%2e",
        "%2e%2e",
        "a%2fb",
        "Payment%73",
        "..x",
        "x%20y",
        "a|b",
        "%",
        "%RETRY%group",  # RocketMQ's system prefixes hold '%': refused by the alphabet first
        "%DLQ%group",
    ],
)
def test_names_that_could_escape_or_break_paths_are_refused(topic: str) -> None:
    problem = topic_name_problem(topic)
    assert problem is not None and "letters, digits, '_' or '-'" in problem
    with pytest.raises(ValueError, match="letters, digits"):
        table(topic)


@pytest.mark.parametrize(
    "topic",
    [
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "RMQ_SYS_anything",
        "system",
        "TBW102",
    ],
)
def test_system_names_are_refused(topic: str) -> None:
    assert "system topic" in (topic_name_problem(topic) or "")


@pytest.mark.parametrize("topic", [None, 7, b"bytes", ["list"]])
def test_non_strings_are_refused(topic: object) -> None:
    assert "must be a string" in (topic_name_problem(topic) or "")
