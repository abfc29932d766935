"""The transaction lifecycle of contract 3 as one table of legal moves.

    PREPARED --COMMIT--> COMMITTED            PREPARED --ROLLBACK--> ROLLED_BACK
    PREPARED --CHECK_DUE--> CHECKING          CHECKING --CHECK_DUE--> CHECKING (n + 1)
    CHECKING --COMMIT / ROLLBACK--> COMMITTED / ROLLED_BACK
    CHECKING --CHECKS_EXHAUSTED--> DISCARDED  PREPARED/CHECKING --EXPIRED--> DISCARDED
    DISCARDED --RESUME--> CHECKING (count reset, RocketMQ's resumeCheckHalfMessage)
    DISCARDED --OPERATOR_COMMIT / OPERATOR_ROLLBACK--> COMMITTED / ROLLED_BACK

Every (state, event) pair has exactly one entry in `TRANSITIONS`: either a move to a new
state, or no move plus the verdict recorded for the event (a duplicate commit, a conflicting
rollback, an op that came after the discard...). `apply` is the only way a state changes,
so the streaming code cannot invent a move that this table does not allow (the habit of
kafka-python's TransactionManager).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from enum import IntEnum, StrEnum

log = logging.getLogger(__name__)


class TransactionState(IntEnum):
    """Where a transaction is; the last three are final (DISCARDED only until an operator acts)."""

    PREPARED = 0
    CHECKING = 1
    COMMITTED = 2
    ROLLED_BACK = 3
    DISCARDED = 4

    @property
    def is_final(self) -> bool:
        """Return True for states that producers' ops no longer change."""
        return self in (
            TransactionState.COMMITTED,
            TransactionState.ROLLED_BACK,
            TransactionState.DISCARDED,
        )


class Event(StrEnum):
    """Something that happens to a transaction."""

    COMMIT = "COMMIT"  # a producer's COMMIT op (sent directly or as a check answer)
    ROLLBACK = "ROLLBACK"  # a producer's ROLLBACK op
    UNKNOWN = "UNKNOWN"  # a producer's UNKNOWN op: recorded for audit, decides nothing
    CHECK_DUE = "CHECK_DUE"  # the timeout (first) or the check interval (later) has passed
    CHECKS_EXHAUSTED = "CHECKS_EXHAUSTED"  # transaction_check_max checks went unanswered
    EXPIRED = "EXPIRED"  # the half is older than file_reserved_time
    RESUME = "RESUME"  # admin: check a discarded transaction again, count reset to 0
    OPERATOR_COMMIT = "OPERATOR_COMMIT"  # admin: commit, recorded with who and why
    OPERATOR_ROLLBACK = "OPERATOR_ROLLBACK"  # admin: roll back, recorded with who and why


#: The events a producer's op record names (txcoord.op), and those only an operator may send
#: (txcoord.operator required): the wire's op kinds (coordinator/protocol/ingress.py) come from
#: these.
PRODUCER_OPS = (Event.COMMIT, Event.ROLLBACK, Event.UNKNOWN)
OPERATOR_ONLY_OPS = (Event.RESUME,)


class Verdict(StrEnum):
    """What was recorded about an event."""

    APPLIED = "APPLIED"  # the event moved the transaction
    NO_EFFECT = "NO_EFFECT"  # legal, changes nothing (UNKNOWN)
    DUPLICATE = "DUPLICATE"  # the same decision again after the transaction ended
    CONFLICT = "CONFLICT"  # the opposite decision after the transaction ended
    LATE = "LATE"  # a producer's op after DISCARDED: the transaction stays DISCARDED
    IGNORED = "IGNORED"  # a timer or admin event that no longer applies
    # Not a move of the table below: the stage records it on an op whose half never came, or
    # came after the resolved transaction was forgotten (streams/jvm/txcoord/Lifecycle.java).
    ORPHAN = "ORPHAN"


@dataclass(frozen=True)
class Outcome:
    """The state after an event, and what is recorded about the event."""

    state: TransactionState
    verdict: Verdict

    @property
    def moved(self) -> bool:
        """Return True if the event applied (the state may be the same, e.g. CHECKING again)."""
        return self.verdict is Verdict.APPLIED


S, E, V = TransactionState, Event, Verdict


def _stay(state: TransactionState, verdict: Verdict) -> Outcome:
    return Outcome(state, verdict)


def _move(state: TransactionState) -> Outcome:
    return Outcome(state, V.APPLIED)


def _after_end(state: TransactionState) -> dict[Event, Outcome]:
    """Events reaching a committed or rolled-back transaction: recorded, no effect."""
    same = E.COMMIT if state is S.COMMITTED else E.ROLLBACK
    opposite = E.ROLLBACK if state is S.COMMITTED else E.COMMIT
    return {
        same: _stay(state, V.DUPLICATE),
        opposite: _stay(state, V.CONFLICT),
        E.UNKNOWN: _stay(state, V.NO_EFFECT),
        E.CHECK_DUE: _stay(state, V.IGNORED),
        E.CHECKS_EXHAUSTED: _stay(state, V.IGNORED),
        E.EXPIRED: _stay(state, V.IGNORED),
        E.RESUME: _stay(state, V.IGNORED),
        E.OPERATOR_COMMIT: _stay(state, V.DUPLICATE if same is E.COMMIT else V.CONFLICT),
        E.OPERATOR_ROLLBACK: _stay(state, V.DUPLICATE if same is E.ROLLBACK else V.CONFLICT),
    }


#: The whole lifecycle: every state maps every event to an outcome.
TRANSITIONS: dict[TransactionState, dict[Event, Outcome]] = {
    S.PREPARED: {
        E.COMMIT: _move(S.COMMITTED),
        E.ROLLBACK: _move(S.ROLLED_BACK),
        E.UNKNOWN: _stay(S.PREPARED, V.NO_EFFECT),
        E.CHECK_DUE: _move(S.CHECKING),
        E.CHECKS_EXHAUSTED: _stay(S.PREPARED, V.IGNORED),  # nothing was checked yet
        E.EXPIRED: _move(S.DISCARDED),
        E.RESUME: _stay(S.PREPARED, V.IGNORED),
        E.OPERATOR_COMMIT: _move(S.COMMITTED),
        E.OPERATOR_ROLLBACK: _move(S.ROLLED_BACK),
    },
    S.CHECKING: {
        E.COMMIT: _move(S.COMMITTED),
        E.ROLLBACK: _move(S.ROLLED_BACK),
        E.UNKNOWN: _stay(S.CHECKING, V.NO_EFFECT),
        E.CHECK_DUE: _move(S.CHECKING),
        E.CHECKS_EXHAUSTED: _move(S.DISCARDED),
        E.EXPIRED: _move(S.DISCARDED),
        E.RESUME: _stay(S.CHECKING, V.IGNORED),
        E.OPERATOR_COMMIT: _move(S.COMMITTED),
        E.OPERATOR_ROLLBACK: _move(S.ROLLED_BACK),
    },
    S.COMMITTED: _after_end(S.COMMITTED),
    S.ROLLED_BACK: _after_end(S.ROLLED_BACK),
    S.DISCARDED: {
        E.COMMIT: _stay(S.DISCARDED, V.LATE),
        E.ROLLBACK: _stay(S.DISCARDED, V.LATE),
        E.UNKNOWN: _stay(S.DISCARDED, V.LATE),
        E.CHECK_DUE: _stay(S.DISCARDED, V.IGNORED),
        E.CHECKS_EXHAUSTED: _stay(S.DISCARDED, V.IGNORED),
        E.EXPIRED: _stay(S.DISCARDED, V.IGNORED),
        E.RESUME: _move(S.CHECKING),
        E.OPERATOR_COMMIT: _move(S.COMMITTED),
        E.OPERATOR_ROLLBACK: _move(S.ROLLED_BACK),
    },
}


def applies_in(event: Event) -> tuple[TransactionState, ...]:
    """Return the states in which `event` moves a transaction, in the table's order."""
    return tuple(state for state, moves in TRANSITIONS.items() if moves[event].moved)


#: The producer's ops that decide something (COMMIT, ROLLBACK; UNKNOWN moves nothing).
DECISIVE_OPS = tuple(event for event in PRODUCER_OPS if applies_in(event))


def apply(state: TransactionState, event: Event) -> Outcome:
    """Return the outcome of `event` in `state`: the one entry of the table for the pair."""
    outcome = TRANSITIONS[state][event]
    if outcome.moved:
        log.debug("transaction %s --%s--> %s", state.name, event.value, outcome.state.name)
    return outcome


def event_for_op(op: str, by_operator: bool = False) -> Event:
    """Return the event of an op record's type (COMMIT, ROLLBACK, UNKNOWN; operators: RESUME)."""
    allowed = PRODUCER_OPS + OPERATOR_ONLY_OPS if by_operator else PRODUCER_OPS
    if op not in [event.value for event in allowed]:
        names = ", ".join(event.value for event in allowed)
        raise ValueError(f"op must be one of {names}, not {op!r}")
    event = Event(op)
    if by_operator and event is E.COMMIT:
        return E.OPERATOR_COMMIT
    if by_operator and event is E.ROLLBACK:
        return E.OPERATOR_ROLLBACK
    return event
