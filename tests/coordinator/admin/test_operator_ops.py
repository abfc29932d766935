"""An operator's op is refused before sending exactly where the state machine would ignore it."""

from __future__ import annotations

import pytest

from coordinator.admin.operator_ops import refusal
from coordinator.core import state_machine
from coordinator.core.state_machine import apply, event_for_op
from delta_tables.lookup import TransactionState


def found(state: str) -> TransactionState:
    return TransactionState(
        transaction_id="t-1",
        producer_group="orders",
        topic="Orders",
        queue_id=0,
        msg_id="m",
        state=state,
        check_count=0,
        prepared_at=None,
        resolved_at=None,
        reason=None,
    )


@pytest.mark.parametrize("op", ["COMMIT", "ROLLBACK", "RESUME"])
@pytest.mark.parametrize("current", list(state_machine.TransactionState), ids=lambda s: s.name)
def test_an_operator_op_is_sent_where_the_coordinator_applies_it(
    op: str, current: state_machine.TransactionState
) -> None:
    applies = apply(current, event_for_op(op, by_operator=True)).moved
    problem = refusal(found(current.name), op, "alice", "the payment was confirmed by phone")
    assert (problem is None) == applies, problem


def test_unknown_is_no_operator_op() -> None:
    problem = refusal(found("PREPARED"), "UNKNOWN", "alice", "why")
    assert problem == "an operator's op is COMMIT, ROLLBACK or RESUME, not 'UNKNOWN'"


def test_a_refusal_names_the_states_an_op_applies_in() -> None:
    problem = refusal(found("COMMITTED"), "ROLLBACK", "alice", "why")
    assert problem == (
        "transaction t-1 is COMMITTED: ROLLBACK applies only to a PREPARED, CHECKING or "
        "DISCARDED transaction"
    )
