"""LocalTransactionState: RocketMQ's three answers, its UNKNOW spelling kept as an alias."""

from __future__ import annotations

import pytest

from coordinator.sdk import LocalTransactionState


def test_unknow_is_an_alias_of_unknown() -> None:
    assert LocalTransactionState.UNKNOW is LocalTransactionState.UNKNOWN
    assert LocalTransactionState["UNKNOW"] is LocalTransactionState.UNKNOWN


def test_there_are_exactly_three_states() -> None:
    assert [s.name for s in LocalTransactionState] == [
        "COMMIT_MESSAGE",
        "ROLLBACK_MESSAGE",
        "UNKNOWN",
    ]


@pytest.mark.parametrize(
    ("state", "op"),
    [
        (LocalTransactionState.COMMIT_MESSAGE, "COMMIT"),
        (LocalTransactionState.ROLLBACK_MESSAGE, "ROLLBACK"),
        (LocalTransactionState.UNKNOWN, "UNKNOWN"),
        (LocalTransactionState.UNKNOW, "UNKNOWN"),
    ],
)
def test_each_state_sends_its_op(state: LocalTransactionState, op: str) -> None:
    assert state.op == op
