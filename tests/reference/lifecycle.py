"""What happens to one transaction, given what arrived for it and the time: pure logic.

The readable reference model of the rules the coordinator's stateful stage runs in the JVM
(streams/jvm/txcoord/Lifecycle.java): the stage calls its twin of `on_input` with the rows of
one micro-batch for one transaction, and of `on_timer` when that transaction's single timer
fires. A differential property-based test (tests/streams/stage/test_lifecycle_twin.py) proves both
agree; the product holds only what both are given (streams/stage/lifecycle.py: `Rules`, and the
kinds of rows the writer acts on, `Kind`).
A transaction is identified by (producer group, transaction id) (contract 3): the stage is keyed
by both, so every half and op given to these functions belongs to one group, and another
group's half or op with the same id is a transaction of its own that can neither decide,
reveal nor block this one (an op whose group sent no half with that id is that group's
orphan). Both take the state as it was and two times, and return the new state, the rows to
emit and the next timer. No Spark, no clock of its own: the tests drive it with plain
values, and a replayed batch (same input, same batch watermark and timestamp) emits the
same rows.

Every decision is made in store time
-----------------------------------------------
Store time is the broker's LogAppendTime of a half or op. `now_ms` is the stream's event-time
watermark: the stream has provably seen everything stored up to it (heartbeats keep it
moving). A timer is a store time: it fires only once the watermark has passed it, so every
op stored before a check, discard or expiry was due has been seen, and it wins. Within one
batch, ops are taken in store order, and a discard due before an op was stored acts first
(the op is then late); a check due before a decisive op was stored is not sent at all (the
answer is already there). `wall_ms` (the batch's processing time) is what the output rows
record (requested, resolved, delivered at), and the base of the next check: check n+1 is
due `transaction_check_interval` after check n was sent, so a producer has the whole
interval to answer, however late the check went out. (Store time and the driver's clock are
assumed to agree to within a second: the broker's and the driver's clocks, NTP-synchronised
in a cluster, the same clock locally.)

What reaches this stage (see streams/query/decision_query.py): every half and every op record of
the transaction, as they land, in whichever order (an op may come before its half; an answer
to a check long after the half). A half whose decisive op is stored within
`transaction_timeout` of it is decided without a check: the common, fast case.

One transaction's rows may repeat an op (a batch replayed, a half the producer sent
twice); ops are deduplicated by `op_id` (within the batch, and against
the last `JUDGED_MEMORY` decisive ops already judged) and applied in store order (ties by op
id): the first decisive op wins (contract 3).

Timer, one per transaction, in store time:
- no half yet: the ops wait `orphan_wait` after the first of them was stored, then are
  recorded as ORPHAN;
- PREPARED / CHECKING: the earlier of the next check (first: stored + max(timeout,
  immunity), RocketMQ's CHECK_IMMUNITY_TIME_IN_SECONDS, the immunity clamped to
  `max_check_immunity`; later: when the last check was sent + check interval) and the
  expiry (stored +
  `file_reserved_time`): a half older than that is DISCARDED as expired whatever its
  immunity or check interval say (contract 4), and a due transaction past `check_max` checks is
  DISCARDED;
- COMMITTED / ROLLED_BACK: forgotten after `resolved_retention` (until then a later op is
  recorded as DUPLICATE or CONFLICT; afterwards as ORPHAN, still deciding nothing). Such a
  transaction only judges later ops: `resolved_memory` is all of it worth keeping, and the
  stateful stage may forget it by an expiry of its own instead of this timer;
- DISCARDED: forgotten once the half is older than `file_reserved_time` (until then a
  producer's op is recorded as LATE, and an operator may still commit, roll back or RESUME
  it: checked again from the RESUME's store time, its count reset).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from coordinator.core.state_machine import (
    DECISIVE_OPS,
    Event,
    Outcome,
    TransactionState,
    Verdict,
    apply,
    event_for_op,
)
from streams.stage.lifecycle import Kind, Rules

#: The op kinds that decide (COMMIT, ROLLBACK), as the state machine's table says.
DECISIVE: tuple[str, ...] = tuple(event.value for event in DECISIVE_OPS)
#: An operator's op that checks a DISCARDED transaction again, count reset (contract 3).
RESUME: str = Event.RESUME.value
#: How many judged decisive op ids a transaction remembers, so that the same op record seen
#: again (a duplicate half re-joins it) is not judged twice. Bounded: state stays small.
JUDGED_MEMORY = 8


@dataclass(frozen=True)
class Half:
    """A half message, as the coordinator needs it for checks and delivery."""

    transaction_id: str
    msg_id: str
    producer_group: str
    topic: str
    queue_id: int
    body: bytes
    keys: tuple[str, ...]
    tags: str | None
    properties: tuple[tuple[str, str], ...]
    check_immunity_seconds: int | None
    stored_ms: int


@dataclass(frozen=True)
class Op:
    """An op record."""

    op_id: str
    transaction_id: str
    producer_group: str
    op: str
    from_check: bool
    operator: str | None
    reason: str | None
    stored_ms: int

    @property
    def order(self) -> tuple[int, str]:
        """Return the key that orders ops: store time, then op id (contract 3)."""
        return (self.stored_ms, self.op_id)


@dataclass(frozen=True)
class TxState:
    """Everything remembered about one transaction between batches."""

    state: TransactionState | None = None  # None: only ops so far, no half
    half: Half | None = None
    check_count: int = 0
    deciding_op_id: str | None = None
    pending_ops: tuple[Op, ...] = ()
    timer_ms: int | None = None
    judged_ops: tuple[str, ...] = ()  # the last JUDGED_MEMORY decisive op ids judged


@dataclass(frozen=True)
class Emit:
    """One row for the writer; which fields matter depends on `kind`."""

    kind: Kind
    transaction_id: str
    at_ms: int  # the batch's processing time: delivered / requested / resolved / recorded
    half: Half | None = None
    check_number: int | None = None
    state: TransactionState | None = None
    reason: str | None = None
    op: Op | None = None
    verdict: str | None = None
    detail: str | None = None
    check_count: int | None = None
    deciding_op_id: str | None = None


@dataclass(frozen=True)
class Step:
    """The result of an input or a timer: new state (None: forget it), rows, next timer."""

    state: TxState | None
    emits: list[Emit] = field(default_factory=list)


def is_resolved(state: TxState) -> bool:
    """Return True once the transaction is committed or rolled back: nothing moves it again."""
    return state.state in (TransactionState.COMMITTED, TransactionState.ROLLED_BACK)


def resolved_memory(state: TxState) -> TxState:
    """Return what a resolved transaction must remember to judge later ops the same way.

    Nothing moves it again, so nothing it emits needs the half's body, keys or properties:
    its verdicts need the state (DUPLICATE / CONFLICT) and the ops already judged.
    """
    assert is_resolved(state) and state.half is not None
    return replace(state, half=replace(state.half, body=b"", keys=(), properties=()))


def first_check_due_ms(half: Half, rules: Rules) -> int:
    """Return when the first check is due: stored + max(timeout, immunity) (RocketMQ).

    The immunity is clamped to `max_check_immunity`: a value the ingest should have
    quarantined (2147483647 s is 68 years) must not park the half beyond every check.
    """
    immunity_ms = min((half.check_immunity_seconds or 0) * 1000, rules.max_check_immunity_ms)
    return half.stored_ms + max(rules.timeout_ms, immunity_ms)


def expires_at_ms(half: Half, rules: Rules) -> int:
    """Return when the half is older than `file_reserved_time`: DISCARDED as expired."""
    return half.stored_ms + rules.file_reserved_ms


def _live_timer(half: Half, due_ms: int, rules: Rules) -> int:
    """Return the one timer of a live transaction: its next check, or its expiry if sooner.

    Expiry must not depend on any other timer (contract 4): with a check interval, or an
    immunity, longer than what is left of `file_reserved_time`, the half still expires on
    time.
    """
    return min(due_ms, expires_at_ms(half, rules))


def _verdict(op: Op, verdict: str, wall_ms: int, detail: str | None = None) -> Emit:
    return Emit(Kind.VERDICT, op.transaction_id, wall_ms, op=op, verdict=verdict, detail=detail)


def _final(s: TxState, wall_ms: int, reason: str, op: Op | None = None) -> Emit:
    assert s.half is not None and s.state is not None
    return Emit(
        Kind.FINAL,
        s.half.transaction_id,
        wall_ms,
        half=s.half,
        state=s.state,
        reason=reason,
        check_count=s.check_count,
        deciding_op_id=op.op_id if op else s.deciding_op_id,
    )


def _forget_at(s: TxState, now_ms: int, rules: Rules) -> int:
    """Return when (store time) a transaction in a final state may be forgotten."""
    assert s.half is not None
    if s.state is TransactionState.DISCARDED:
        return max(now_ms, expires_at_ms(s.half, rules))
    return now_ms + rules.resolved_retention_ms


def is_live(state: TxState) -> bool:
    """Return True while the transaction waits for a decision (PREPARED or CHECKING)."""
    return state.state in (TransactionState.PREPARED, TransactionState.CHECKING)


def _gave_up_before(s: TxState, stored_ms: int, rules: Rules) -> bool:
    """Return True if the live transaction was discarded before `stored_ms` (store time).

    That is: its half expired before, or its timer, due before, discards it (checks spent).
    """
    assert s.half is not None and s.timer_ms is not None
    expiry = expires_at_ms(s.half, rules)
    return stored_ms > expiry or (
        s.timer_ms < stored_ms and (s.timer_ms >= expiry or s.check_count >= rules.check_max)
    )


def _apply_op(
    s: TxState, op: Op, now_ms: int, wall_ms: int, rules: Rules
) -> tuple[TxState, list[Emit]]:
    """Apply one op to a transaction whose half is known."""
    half = s.half
    assert half is not None and s.state is not None
    # No group check: the stage is keyed by (group, id), so `op` is of the half's group.
    outcome: Outcome = apply(s.state, event_for_op(op.op, by_operator=op.operator is not None))
    emits = [_verdict(op, outcome.verdict.value, wall_ms)]
    if not outcome.moved:
        return s, emits
    if op.op == RESUME:  # checked again from its store time, as if never checked (RocketMQ's
        # resumeCheckHalfMessage); never later than the expiry
        timer = _live_timer(half, op.stored_ms, rules)
        return replace(s, state=outcome.state, check_count=0, timer_ms=timer), emits
    s = replace(s, state=outcome.state, deciding_op_id=op.op_id)
    reason = "operator" if op.operator is not None else ("check" if op.from_check else "op")
    if outcome.state is TransactionState.COMMITTED:
        emits.append(Emit(Kind.DELIVER, half.transaction_id, wall_ms, half=half, op=op))
    emits.append(_final(s, wall_ms, reason, op))
    # Counted from the decision (the batch's time; the watermark may still be unset, 0, in a
    # query's first batches), as `resolved_retention` says.
    decided = max(now_ms, op.stored_ms, wall_ms)
    return replace(s, timer_ms=_forget_at(s, decided, rules)), emits


def on_input(
    state: TxState | None,
    halves: list[Half],
    ops: list[Op],
    now_ms: int,
    rules: Rules,
    *,
    wall_ms: int | None = None,
) -> Step:
    """Take this batch's halves and ops for one transaction.

    `now_ms` is the store time the stream has seen everything up to (the watermark);
    `wall_ms` the batch's processing time, which output rows record (default: `now_ms`).
    """
    wall = now_ms if wall_ms is None else wall_ms
    s = state or TxState()
    emits: list[Emit] = []
    if s.half is None and halves:
        half = min(halves, key=lambda h: (h.stored_ms, h.msg_id))
        s = replace(s, half=half, state=s.state or TransactionState.PREPARED)
    seen = {op.op_id for op in s.pending_ops} | set(s.judged_ops)
    fresh = {op.op_id: op for op in ops if op.op_id not in seen}
    arrived = sorted([*s.pending_ops, *fresh.values()], key=lambda op: op.order)

    if s.half is None:
        waiting = []
        for op in arrived:
            if op.op in DECISIVE:
                waiting.append(op)
            else:  # UNKNOWN decides nothing, with or without a half
                emits.append(_verdict(op, Verdict.NO_EFFECT.value, wall, "no half yet"))
        if not waiting:
            return Step(None, emits)
        timer = s.timer_ms if s.pending_ops else waiting[0].stored_ms + rules.orphan_wait_ms
        s = replace(s, pending_ops=tuple(waiting), timer_ms=timer)
        if timer is not None and timer <= now_ms:  # the window had passed before they came
            step = on_timer(s, now_ms, rules, wall_ms=wall)
            return Step(step.state, emits + step.emits)
        return Step(s, emits)

    half = s.half
    s = _armed(replace(s, pending_ops=()), rules)
    for op in arrived:
        # Store order: a discard or an expiry due before this op was stored comes first,
        # and the op is late. A check due before a decisive op was stored is not sent at
        # all: the answer is here. (One due before an UNKNOWN goes out as usual.)
        if is_live(s) and _gave_up_before(s, op.stored_ms, rules):
            step = _fire(s, max(now_ms, op.stored_ms), rules, wall)
            assert step.state is not None
            s, emits = step.state, emits + step.emits
        s, op_emits = _apply_op(s, op, now_ms, wall, rules)
        emits += op_emits
        if op.op in (*DECISIVE, RESUME):
            s = replace(s, judged_ops=(*s.judged_ops, op.op_id)[-JUDGED_MEMORY:])
    s = _armed(s, rules)
    if is_live(s) and s.timer_ms is not None and s.timer_ms <= now_ms:
        step = _fire(s, now_ms, rules, wall)
        return _settled(Step(step.state, emits + step.emits), now_ms)
    return _settled(Step(s, emits), now_ms)


def _armed(s: TxState, rules: Rules) -> TxState:
    """Return the transaction with its timer set if it is live and has none (or is PREPARED).

    A PREPARED transaction's timer is its first check (or its expiry if sooner).
    """
    half = s.half
    assert half is not None
    if is_live(s) and (s.timer_ms is None or s.state is TransactionState.PREPARED):
        due = first_check_due_ms(half, rules) if s.check_count == 0 else s.timer_ms
        assert due is not None
        return replace(s, timer_ms=_live_timer(half, due, rules))
    return s


def _settled(step: Step, now_ms: int) -> Step:
    """Return `step`, its state forgotten if it is final and its timer already passed."""
    s = step.state
    final = s is not None and s.state is not None and s.state.is_final
    if final and s is not None and s.timer_ms is not None and s.timer_ms <= now_ms:
        return Step(None, step.emits)
    return step


def on_timer(state: TxState, now_ms: int, rules: Rules, *, wall_ms: int | None = None) -> Step:
    """Act on this transaction's timer (due at `state.timer_ms`, store time, <= `now_ms`).

    Check, discard, give up on orphans, or forget.
    """
    wall = now_ms if wall_ms is None else wall_ms
    return _settled(_fire(state, now_ms, rules, wall), now_ms)


def _fire(s: TxState, now_ms: int, rules: Rules, wall: int) -> Step:
    """Act on the timer; a discard keeps DISCARDED state with the timer that forgets it."""
    half = s.half
    if half is None:
        detail = f"no half within {rules.orphan_wait_ms / 1000:.0f} s"
        return Step(None, [_verdict(op, "ORPHAN", wall, detail) for op in s.pending_ops])
    assert s.state is not None
    if s.state.is_final:
        return Step(None)
    # Older than file_reserved_time by the time it is due or seen: expired, never checked.
    if max(now_ms, now_ms if s.timer_ms is None else s.timer_ms) >= expires_at_ms(half, rules):
        return _discard(s, Event.EXPIRED, "expired", now_ms, rules, wall_ms=wall)
    if s.check_count >= rules.check_max:
        return _discard(s, Event.CHECKS_EXHAUSTED, "check_max", now_ms, rules, wall_ms=wall)
    outcome = apply(s.state, Event.CHECK_DUE)
    # The next check is due an interval after this one is sent (never before the watermark).
    s = replace(
        s,
        state=outcome.state,
        check_count=s.check_count + 1,
        timer_ms=_live_timer(half, max(wall, now_ms) + rules.check_interval_ms, rules),
    )
    check = Emit(Kind.CHECK, half.transaction_id, wall, half=half, check_number=s.check_count)
    return Step(s, [check])


def _discard(
    s: TxState, event: Event, reason: str, now_ms: int, rules: Rules, *, wall_ms: int
) -> Step:
    half = s.half
    assert s.state is not None and half is not None
    outcome = apply(s.state, event)
    s = replace(s, state=outcome.state)
    discard = Emit(
        Kind.DISCARD,
        half.transaction_id,
        wall_ms,
        half=half,
        reason=reason,
        check_count=s.check_count,
    )
    emits = [discard, _final(s, wall_ms, reason)]
    # Expired: the timer that forgets it is already due, so nothing is kept beyond this
    # call (`on_input` may still judge a later op of the same batch as LATE with it).
    return Step(replace(s, timer_ms=_forget_at(s, now_ms, rules)), emits)
