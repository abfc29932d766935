"""One transaction's life, driven with plain values and a hand-moved clock (no Spark)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from coordinator.core.state_machine import TransactionState
from streams.stage.lifecycle import Kind, Rules
from tests.reference.lifecycle import (
    Emit,
    Half,
    Op,
    Step,
    TxState,
    first_check_due_ms,
    is_resolved,
    on_input,
    on_timer,
    resolved_memory,
)

S = 1000
RULES = Rules(
    timeout_ms=6 * S,
    check_interval_ms=30 * S,
    check_max=15,
    file_reserved_ms=72 * 3600 * S,
    resolved_retention_ms=1800 * S,
    orphan_wait_ms=22 * S,
    max_check_immunity_ms=3600 * S,
)
T0 = 1_800_000_000_000


def half(tx: str = "tx", at: int = T0, group: str = "orders", immunity: int | None = None) -> Half:
    return Half(tx, f"m-{tx}", group, "OrderPaid", 1, b"body", ("k",), None, (), immunity, at)


def op(kind: str, at: int, op_id: str = "", group: str = "orders", **kw: object) -> Op:
    fields = {"from_check": False, "operator": None, "reason": None, **kw}
    return Op(op_id or f"op-{at}-{kind}", "tx", group, kind, stored_ms=at, **fields)  # type: ignore[arg-type]


def kinds(step: Step) -> list[str]:
    return [e.kind.value for e in step.emits]


def verdicts(step: Step) -> list[str | None]:
    return [e.verdict for e in step.emits if e.kind is Kind.VERDICT]


def only(step: Step, kind: Kind) -> Emit:
    (emit,) = [e for e in step.emits if e.kind is kind]
    return emit


def test_commit_within_the_window_delivers_once() -> None:
    commit = op("COMMIT", T0 + 2 * S)
    step = on_input(None, [half()], [commit, commit], T0 + 3 * S, RULES)  # matched + raw
    assert kinds(step) == ["VERDICT", "DELIVER", "FINAL"]
    assert only(step, Kind.FINAL).state is TransactionState.COMMITTED
    assert only(step, Kind.FINAL).reason == "op"
    assert only(step, Kind.DELIVER).op == commit
    assert (
        step.state is not None and step.state.timer_ms == T0 + 3 * S + RULES.resolved_retention_ms
    )


def test_rollback_within_the_window_is_never_delivered() -> None:
    step = on_input(None, [half()], [op("ROLLBACK", T0 + S)], T0 + 2 * S, RULES)
    assert kinds(step) == ["VERDICT", "FINAL"]
    assert only(step, Kind.FINAL).state is TransactionState.ROLLED_BACK


def test_first_decisive_op_wins_by_store_time_then_op_id() -> None:
    ops = [
        op("ROLLBACK", T0 + 2 * S, "b"),
        op("COMMIT", T0 + 2 * S, "a"),
        op("COMMIT", T0 + S, "z"),
    ]
    step = on_input(None, [half()], ops, T0 + 3 * S, RULES)
    assert only(step, Kind.FINAL).deciding_op_id == "z"
    assert [e.op.op_id for e in step.emits if e.op and e.kind is Kind.VERDICT] == ["z", "a", "b"]
    assert verdicts(step) == ["APPLIED", "DUPLICATE", "CONFLICT"]


def test_later_ops_are_recorded_and_change_nothing() -> None:
    done = on_input(None, [half()], [op("COMMIT", T0 + S)], T0 + S, RULES).state
    again = on_input(
        done, [], [op("COMMIT", T0 + 9 * S), op("ROLLBACK", T0 + 9 * S)], T0 + 9 * S, RULES
    )
    assert kinds(again) == ["VERDICT", "VERDICT"]
    assert verdicts(again) == ["DUPLICATE", "CONFLICT"]
    assert again.state is not None and done is not None
    assert replace(again.state, judged_ops=done.judged_ops) == done  # only remembers them


def test_a_late_commit_never_makes_a_rollback_visible() -> None:
    done = on_input(None, [half()], [op("ROLLBACK", T0 + S)], T0 + S, RULES).state
    late = on_input(done, [], [op("COMMIT", T0 + 100 * S, from_check=True)], T0 + 100 * S, RULES)
    assert Kind.DELIVER not in [e.kind for e in late.emits]
    assert verdicts(late) == ["CONFLICT"]


def test_unanswered_half_is_checked_every_interval_then_discarded_once() -> None:
    """RocketMQ: check max times, then discard exactly once (TRANS_CHECK_MAX_TIME_TOPIC)."""
    now = T0 + 2 * RULES.timeout_ms + 2 * S  # the join gives the half up at ~2 x timeout
    step = on_input(None, [half()], [], now, RULES)
    assert kinds(step) == ["CHECK"]
    assert only(step, Kind.CHECK).check_number == 1
    state = step.state
    numbers = [1]
    for _ in range(RULES.check_max + 3):
        assert state is not None and state.timer_ms is not None
        now = state.timer_ms
        step = on_timer(state, now, RULES)
        numbers += [e.check_number for e in step.emits if e.kind is Kind.CHECK]  # type: ignore[misc]
        state = step.state
        if any(e.kind is Kind.DISCARD for e in step.emits):
            break
    assert numbers == list(range(1, RULES.check_max + 1))
    assert kinds(step) == ["DISCARD", "FINAL"]
    assert only(step, Kind.DISCARD).reason == "check_max"
    assert only(step, Kind.FINAL).check_count == RULES.check_max
    assert state is not None and state.state is TransactionState.DISCARDED
    # The tombstone lasts until the half is older than file_reserved_time, then goes.
    assert state.timer_ms == T0 + RULES.file_reserved_ms
    assert on_timer(state, state.timer_ms, RULES) == Step(None)


def test_an_answer_to_a_check_decides() -> None:
    checking = on_input(None, [half()], [], T0 + 14 * S, RULES).state
    answer = op("COMMIT", T0 + 15 * S, from_check=True)
    step = on_input(checking, [], [answer], T0 + 15 * S, RULES)
    assert kinds(step) == ["VERDICT", "DELIVER", "FINAL"]
    assert only(step, Kind.FINAL).reason == "check"
    assert only(step, Kind.FINAL).check_count == 1


def test_old_half_without_op_gets_exactly_one_check() -> None:
    """RocketMQ's 'check with check': a half born 80 s ago, no op: one check, not a burst."""
    step = on_input(None, [half()], [], T0 + 80 * S, RULES)
    assert kinds(step) == ["CHECK"]
    assert step.state is not None and step.state.timer_ms == T0 + 110 * S


def test_immunity_delays_the_first_check_but_never_below_the_timeout() -> None:
    assert first_check_due_ms(half(immunity=60), RULES) == T0 + 60 * S
    assert first_check_due_ms(half(immunity=2), RULES) == T0 + 6 * S
    step = on_input(None, [half(immunity=60)], [], T0 + 14 * S, RULES)
    assert kinds(step) == []  # given up on by the join, but immune until T0 + 60 s
    assert step.state is not None and step.state.timer_ms == T0 + 60 * S
    assert kinds(on_timer(step.state, T0 + 60 * S, RULES)) == ["CHECK"]


def test_unknown_has_no_effect() -> None:
    checking = on_input(None, [half()], [], T0 + 14 * S, RULES).state
    step = on_input(checking, [], [op("UNKNOWN", T0 + 15 * S, from_check=True)], T0 + 15 * S, RULES)
    assert verdicts(step) == ["NO_EFFECT"]
    assert step.state == checking


def test_an_immunity_above_the_maximum_is_clamped_to_it() -> None:
    """Defence in depth: 2147483647 s (68 years) must not park a half beyond every check."""
    parked = half(immunity=2_147_483_647)
    assert first_check_due_ms(parked, RULES) == T0 + RULES.max_check_immunity_ms
    step = on_input(None, [parked], [], T0 + 14 * S, RULES)
    assert kinds(step) == []
    assert step.state is not None and step.state.timer_ms == T0 + RULES.max_check_immunity_ms
    assert kinds(on_timer(step.state, T0 + RULES.max_check_immunity_ms, RULES)) == ["CHECK"]


def test_a_check_interval_longer_than_file_reserved_time_still_expires_on_time() -> None:
    """contract 4: expired at stored + file_reserved_time, whatever the timers say."""
    rules = replace(RULES, file_reserved_ms=60 * S, check_interval_ms=3600 * S)
    step = on_input(None, [half()], [], T0 + 14 * S, rules)
    assert kinds(step) == ["CHECK"]
    assert step.state is not None and step.state.timer_ms == T0 + 60 * S  # not T0 + 3614 s
    gone = on_timer(step.state, T0 + 60 * S, rules)
    assert kinds(gone) == ["DISCARD", "FINAL"]
    assert only(gone, Kind.DISCARD).reason == "expired"
    assert gone.state is None  # older than file_reserved_time: nothing left to keep


def test_an_immunity_longer_than_file_reserved_time_still_expires_on_time() -> None:
    rules = replace(RULES, file_reserved_ms=60 * S)
    step = on_input(None, [half(immunity=120)], [], T0 + 14 * S, rules)
    assert kinds(step) == []
    assert step.state is not None and step.state.timer_ms == T0 + 60 * S
    gone = on_timer(step.state, T0 + 60 * S, rules)
    assert kinds(gone) == ["DISCARD", "FINAL"]
    assert only(gone, Kind.DISCARD).reason == "expired"


def test_a_resumed_transaction_keeps_its_expiry() -> None:
    rules = replace(RULES, file_reserved_ms=1000 * S, check_interval_ms=3600 * S)
    state = TxState(TransactionState.DISCARDED, half(), 15, None, (), T0 + 1000 * S)
    resume = op("RESUME", T0 + 900 * S, operator="alice")
    step = on_input(state, [], [resume], T0 + 900 * S, rules)
    assert kinds(step) == ["VERDICT", "CHECK"]
    assert step.state is not None and step.state.timer_ms == T0 + 1000 * S


def test_an_op_before_its_half_waits_for_it() -> None:
    commit = op("COMMIT", T0 + S)
    waiting = on_input(None, [], [commit], T0 + S, RULES)
    assert kinds(waiting) == []
    assert waiting.state is not None and waiting.state.pending_ops == (commit,)
    step = on_input(waiting.state, [half(at=T0 + 2 * S)], [commit], T0 + 3 * S, RULES)
    assert kinds(step) == ["VERDICT", "DELIVER", "FINAL"]  # one verdict, not two


def test_an_op_without_half_becomes_an_orphan() -> None:
    waiting = on_input(None, [], [op("ROLLBACK", T0)], T0, RULES)
    assert waiting.state is not None and waiting.state.timer_ms == T0 + RULES.orphan_wait_ms
    step = on_timer(waiting.state, T0 + RULES.orphan_wait_ms, RULES)
    assert verdicts(step) == ["ORPHAN"]
    assert step.state is None


def test_ops_after_discard_are_late_and_an_operator_can_still_decide() -> None:
    state = TxState(TransactionState.DISCARDED, half(), 15, None, (), T0 + RULES.file_reserved_ms)
    late = on_input(state, [], [op("COMMIT", T0 + 900 * S)], T0 + 900 * S, RULES)
    assert verdicts(late) == ["LATE"]
    assert Kind.DELIVER not in [e.kind for e in late.emits]
    by_operator = op("COMMIT", T0 + 901 * S, operator="alice", reason="paid by phone")
    step = on_input(state, [], [by_operator], T0 + 901 * S, RULES)
    assert kinds(step) == ["VERDICT", "DELIVER", "FINAL"]
    assert only(step, Kind.FINAL).reason == "operator"


def test_a_half_older_than_file_reserved_time_is_discarded_as_expired() -> None:
    step = on_input(None, [half()], [], T0 + RULES.file_reserved_ms + S, RULES)
    assert kinds(step) == ["DISCARD", "FINAL"]
    assert only(step, Kind.DISCARD).reason == "expired"


def test_a_resolved_transaction_is_forgotten_after_the_retention() -> None:
    done = on_input(None, [half()], [op("COMMIT", T0 + S)], T0 + S, RULES).state
    assert done is not None and done.timer_ms is not None
    assert on_timer(done, done.timer_ms, RULES) == Step(None)
    after = on_input(None, [], [op("COMMIT", T0 + 9999 * S)], T0 + 9999 * S, RULES)
    assert after.state is not None and after.state.pending_ops  # waits, then an orphan


@pytest.mark.parametrize("decision", ["COMMIT", "ROLLBACK"])
def test_a_resolved_transaction_judges_every_later_op_the_same_from_its_memory(
    decision: str,
) -> None:
    """The stage keeps only `resolved_memory` of a committed or rolled-back transaction."""
    done = on_input(None, [half()], [op(decision, T0 + S, "first")], T0 + S, RULES).state
    assert done is not None and is_resolved(done)
    memory = resolved_memory(done)
    assert memory.half is not None and memory.half.body == b"" and memory.half.properties == ()
    later = [
        op("COMMIT", T0 + 5 * S), op("ROLLBACK", T0 + 6 * S), op("UNKNOWN", T0 + 7 * S),
        op(decision, T0 + S, "first"),
        op("COMMIT", T0 + 10 * S, operator="alice"), op("ROLLBACK", T0 + 11 * S, operator="bob"),
        op("RESUME", T0 + 12 * S, operator="carol"),
    ]  # fmt: skip
    for one in later:
        full = on_input(done, [half(at=T0 + 4 * S)], [one], T0 + 20 * S, RULES)
        slim = on_input(memory, [half(at=T0 + 4 * S)], [one], T0 + 20 * S, RULES)
        assert slim.emits == full.emits, one
        assert [e.kind for e in full.emits] == [Kind.VERDICT] or full.emits == [], one
        assert full.state is not None and slim.state is not None
        assert slim.state == resolved_memory(full.state), one


def test_no_check_after_the_op_is_processed() -> None:
    """contract 7.6: once decided, the check timer is gone; firing it does nothing."""
    checking = on_input(None, [half()], [], T0 + 14 * S, RULES).state
    done = on_input(checking, [], [op("ROLLBACK", T0 + 20 * S)], T0 + 20 * S, RULES).state
    assert done is not None
    stale = replace(done, timer_ms=T0 + 44 * S)
    assert kinds(on_timer(stale, T0 + 44 * S, RULES)) == []


def test_an_op_seen_again_through_a_duplicate_half_is_not_judged_twice() -> None:
    commit = op("COMMIT", T0 + 2 * S)
    first = on_input(None, [half()], [commit, commit], T0 + 3 * S, RULES)
    assert verdicts(first) == ["APPLIED"]
    # The producer re-sent the half: the join matches the same COMMIT with it again.
    again = on_input(first.state, [half(at=T0 + 4 * S)], [commit], T0 + 5 * S, RULES)
    assert again.emits == [] and again.state == first.state
    # A different COMMIT is still judged (a duplicate), once.
    other = op("COMMIT", T0 + 6 * S, op_id="other")
    later = on_input(again.state, [], [other, other], T0 + 7 * S, RULES)
    assert verdicts(later) == ["DUPLICATE"]
    assert verdicts(on_input(later.state, [], [other], T0 + 8 * S, RULES)) == []


def test_an_operator_resume_checks_a_discarded_transaction_again_from_zero() -> None:
    state = TxState(TransactionState.DISCARDED, half(), 15, None, (), T0 + RULES.file_reserved_ms)
    resume = op("RESUME", T0 + 900 * S, operator="alice", reason="producer is back")
    step = on_input(state, [], [resume], T0 + 900 * S, RULES)
    assert kinds(step) == ["VERDICT", "CHECK"]
    assert verdicts(step) == ["APPLIED"]
    assert only(step, Kind.CHECK).check_number == 1
    resumed = step.state
    assert resumed is not None and resumed.state is TransactionState.CHECKING
    assert resumed.check_count == 1 and resumed.timer_ms == T0 + 930 * S
    # The same op seen again resets nothing; the answer to the new check decides.
    assert on_input(resumed, [], [resume], T0 + 901 * S, RULES).emits == []
    answer = op("COMMIT", T0 + 910 * S, from_check=True)
    done = on_input(resumed, [], [answer], T0 + 910 * S, RULES)
    assert kinds(done) == ["VERDICT", "DELIVER", "FINAL"]
    assert only(done, Kind.FINAL).reason == "check"


def test_a_resume_of_a_live_transaction_is_ignored() -> None:
    checking = on_input(None, [half()], [], T0 + 14 * S, RULES).state
    resume = op("RESUME", T0 + 15 * S, operator="alice")
    step = on_input(checking, [], [resume], T0 + 15 * S, RULES)
    assert verdicts(step) == ["IGNORED"] and step.state is not None
    assert step.state.check_count == 1


# -- store time -----------------------------------------------------------------------------
R3 = replace(RULES, timeout_ms=3 * S, check_interval_ms=4 * S, check_max=3)


def checked_three_times() -> TxState:
    """A half checked 3 times (checks sent at T0+3, +7, +11 s): its discard is due at +15 s."""
    state = on_input(None, [half()], [], T0, R3).state
    for sent in (3, 7, 11):
        assert state is not None and state.timer_ms is not None
        state = on_timer(state, T0 + sent * S, R3).state
    assert state is not None and state.check_count == 3
    assert state.timer_ms == T0 + 15 * S
    return state


def test_a_commit_stored_before_the_discard_was_due_wins_however_late_it_is_seen() -> None:
    """The RocketMQ probe: the answer to the last check is stored in time, seen later."""
    state = checked_three_times()
    commit = op("COMMIT", T0 + 14 * S, from_check=True)  # stored 1 s before the discard
    # The stream has not yet seen everything up to +15 s: the discard cannot be final yet.
    step = on_input(state, [], [commit], T0 + 14_500, R3, wall_ms=T0 + 18 * S)
    assert only(step, Kind.FINAL).state is TransactionState.COMMITTED
    assert only(step, Kind.DELIVER).at_ms == T0 + 18 * S  # rows record the batch's time


def test_a_commit_stored_after_the_discard_was_due_is_late_even_in_the_same_batch() -> None:
    state = checked_three_times()
    commit = op("COMMIT", T0 + 16 * S)  # stored 1 s after the discard was due
    step = on_input(state, [], [commit], T0 + 15_500, R3)
    assert kinds(step) == ["DISCARD", "FINAL", "VERDICT"]
    assert verdicts(step) == ["LATE"]
    assert only(step, Kind.FINAL).state is TransactionState.DISCARDED


def test_no_check_is_sent_when_the_answer_was_stored_before_it_was_due() -> None:
    state = on_input(None, [half()], [], T0, R3).state
    assert state is not None and state.timer_ms == T0 + 3 * S
    commit = op("COMMIT", T0 + 5 * S)  # after the first check was due, seen in one batch
    step = on_input(state, [], [commit], T0 + 6 * S, R3)
    assert "CHECK" not in kinds(step)
    assert only(step, Kind.FINAL).state is TransactionState.COMMITTED


def test_the_next_check_is_due_an_interval_after_the_last_one_was_sent() -> None:
    state = on_input(None, [half()], [], T0, R3).state
    assert state is not None
    # Check 1 was due at +3 s; the stream saw that far at +4 s and sent it at +6 s.
    step = on_timer(state, T0 + 4 * S, R3, wall_ms=T0 + 6 * S)
    assert only(step, Kind.CHECK).at_ms == T0 + 6 * S
    assert step.state is not None and step.state.timer_ms == T0 + 10 * S


def test_an_orphan_waits_from_its_own_store_time() -> None:
    commit = op("COMMIT", T0)
    step = on_input(None, [], [commit], T0 + 50 * S, RULES)  # a backlog: long past the wait
    assert verdicts(step) == ["ORPHAN"]
    assert step.state is None


def test_a_decision_before_the_watermark_is_set_is_remembered_for_the_retention() -> None:
    """A query's first batches run with watermark 0: the memory still lasts the retention."""
    step = on_input(None, [half()], [op("COMMIT", T0 + S)], 0, RULES, wall_ms=T0 + 2 * S)
    assert step.state is not None
    assert step.state.timer_ms == T0 + 2 * S + RULES.resolved_retention_ms
