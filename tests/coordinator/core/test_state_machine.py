"""Every (state, event) pair of the lifecycle, written out independently of the table."""

from __future__ import annotations

import itertools

import pytest

from coordinator.core.state_machine import (
    DECISIVE_OPS,
    TRANSITIONS,
    Event,
    TransactionState,
    Verdict,
    applies_in,
    apply,
    event_for_op,
)

P, C, OK, RB, D = (
    TransactionState.PREPARED,
    TransactionState.CHECKING,
    TransactionState.COMMITTED,
    TransactionState.ROLLED_BACK,
    TransactionState.DISCARDED,
)
A, NE, DUP, CON, LATE, IGN = (
    Verdict.APPLIED,
    Verdict.NO_EFFECT,
    Verdict.DUPLICATE,
    Verdict.CONFLICT,
    Verdict.LATE,
    Verdict.IGNORED,
)

# fmt: off
EXPECTED = {
    # PREPARED: a decisive op ends it; the timeout starts checking; old halves expire.
    (P, Event.COMMIT): (OK, A), (P, Event.ROLLBACK): (RB, A), (P, Event.UNKNOWN): (P, NE),
    (P, Event.CHECK_DUE): (C, A), (P, Event.CHECKS_EXHAUSTED): (P, IGN),
    (P, Event.EXPIRED): (D, A), (P, Event.RESUME): (P, IGN),
    (P, Event.OPERATOR_COMMIT): (OK, A), (P, Event.OPERATOR_ROLLBACK): (RB, A),
    # CHECKING: checked again and again until answered, exhausted or expired.
    (C, Event.COMMIT): (OK, A), (C, Event.ROLLBACK): (RB, A), (C, Event.UNKNOWN): (C, NE),
    (C, Event.CHECK_DUE): (C, A), (C, Event.CHECKS_EXHAUSTED): (D, A),
    (C, Event.EXPIRED): (D, A), (C, Event.RESUME): (C, IGN),
    (C, Event.OPERATOR_COMMIT): (OK, A), (C, Event.OPERATOR_ROLLBACK): (RB, A),
    # COMMITTED: final; the first decisive op won, later ones are recorded only.
    (OK, Event.COMMIT): (OK, DUP), (OK, Event.ROLLBACK): (OK, CON), (OK, Event.UNKNOWN): (OK, NE),
    (OK, Event.CHECK_DUE): (OK, IGN), (OK, Event.CHECKS_EXHAUSTED): (OK, IGN),
    (OK, Event.EXPIRED): (OK, IGN), (OK, Event.RESUME): (OK, IGN),
    (OK, Event.OPERATOR_COMMIT): (OK, DUP), (OK, Event.OPERATOR_ROLLBACK): (OK, CON),
    # ROLLED_BACK: final; a late commit never makes it visible.
    (RB, Event.COMMIT): (RB, CON), (RB, Event.ROLLBACK): (RB, DUP), (RB, Event.UNKNOWN): (RB, NE),
    (RB, Event.CHECK_DUE): (RB, IGN), (RB, Event.CHECKS_EXHAUSTED): (RB, IGN),
    (RB, Event.EXPIRED): (RB, IGN), (RB, Event.RESUME): (RB, IGN),
    (RB, Event.OPERATOR_COMMIT): (RB, CON), (RB, Event.OPERATOR_ROLLBACK): (RB, DUP),
    # DISCARDED: producers' ops are late; only an operator resumes, commits or rolls back.
    (D, Event.COMMIT): (D, LATE), (D, Event.ROLLBACK): (D, LATE), (D, Event.UNKNOWN): (D, LATE),
    (D, Event.CHECK_DUE): (D, IGN), (D, Event.CHECKS_EXHAUSTED): (D, IGN),
    (D, Event.EXPIRED): (D, IGN), (D, Event.RESUME): (C, A),
    (D, Event.OPERATOR_COMMIT): (OK, A), (D, Event.OPERATOR_ROLLBACK): (RB, A),
}
# fmt: on


def test_every_pair_is_specified_once() -> None:
    pairs = set(itertools.product(TransactionState, Event))
    assert set(EXPECTED) == pairs
    assert {(s, e) for s, row in TRANSITIONS.items() for e in row} == pairs


@pytest.mark.parametrize(("state", "event"), sorted(EXPECTED, key=lambda p: (p[0], p[1].value)))
def test_transition(state: TransactionState, event: Event) -> None:
    outcome = apply(state, event)
    assert (outcome.state, outcome.verdict) == EXPECTED[(state, event)]


@pytest.mark.parametrize("event", [Event.COMMIT, Event.ROLLBACK, Event.UNKNOWN])
@pytest.mark.parametrize("state", [OK, RB, D])
def test_no_producer_op_moves_a_final_state(state: TransactionState, event: Event) -> None:
    assert apply(state, event).state is state
    assert not apply(state, event).moved


def test_rolled_back_is_never_made_visible_by_any_event_sequence() -> None:
    """contract 7.2: from ROLLED_BACK, no sequence of events reaches COMMITTED."""
    frontier = {RB}
    for _ in range(4):
        frontier |= {apply(s, e).state for s in frontier for e in Event}
    assert frontier == {RB}


def test_only_an_operator_takes_a_discarded_transaction_anywhere() -> None:
    moves = {e for e in Event if apply(D, e).moved}
    assert moves == {Event.RESUME, Event.OPERATOR_COMMIT, Event.OPERATOR_ROLLBACK}


def test_final_states() -> None:
    assert {s for s in TransactionState if s.is_final} == {OK, RB, D}


def test_op_types_map_to_events() -> None:
    assert event_for_op("COMMIT") is Event.COMMIT
    assert event_for_op("ROLLBACK", by_operator=True) is Event.OPERATOR_ROLLBACK
    assert event_for_op("UNKNOWN", by_operator=True) is Event.UNKNOWN
    assert event_for_op("RESUME", by_operator=True) is Event.RESUME
    for bad in ("commit", "CHECK_DUE", "RESUME", ""):
        with pytest.raises(ValueError, match="one of COMMIT, ROLLBACK, UNKNOWN, not"):
            event_for_op(bad)
    with pytest.raises(ValueError, match="UNKNOWN, RESUME, not 'OPERATOR_COMMIT'"):
        event_for_op("OPERATOR_COMMIT", by_operator=True)


def test_the_facts_read_from_the_table_agree_with_it_written_out() -> None:
    """What the lifecycle (DECISIVE) and the operator commands (APPLIES_IN) derive."""
    assert DECISIVE_OPS == (Event.COMMIT, Event.ROLLBACK)
    assert applies_in(Event.UNKNOWN) == ()
    assert applies_in(Event.CHECK_DUE) == (P, C)
    assert applies_in(Event.OPERATOR_COMMIT) == applies_in(Event.OPERATOR_ROLLBACK) == (P, C, D)
    assert applies_in(Event.RESUME) == (D,)
