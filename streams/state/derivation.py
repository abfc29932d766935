"""One transaction's state in the stage, derived from what the warehouse holds of it (pure).

When the coordinator's checkpoint is gone, or of a layout this version cannot read, its
state is rebuilt from the warehouse (streams/state/warehouse_state.py): the input tables
(`system/half_messages`, `system/op_records`) are the truth, and the output tables say what
the stage already did with them (`system/check_requests`, `transactions`, `op_verdicts`, and
the topic tables). This module turns one transaction's rows of those tables into the state
row the stage keeps (streams/jvm/txcoord/StageRows.java STATE), so that the stage goes on as
if it had never stopped. tests/streams/state/test_derivation.py holds it to the reference
model: for random histories run through tests/reference/lifecycle.py, the state derived from
the rows it emitted equals the state it holds.

What is derived, per (producer group, transaction id):

- the half: the first landed one in store order (then message id), as the stage keeps it;
- decided (the last FINAL row, or a delivery without one), unless an operator's RESUME
  applied after it: its state, check count and deciding op, the half without its message
  if committed or rolled back, and the timer that forgets it (`resolved_retention` after
  the decision; a discarded one when its half expires). Forgotten ones are left out;
- live: PREPARED, or CHECKING with the number of the last check sent since the last RESUME,
  and the timer of its next check (an interval after the last; the first check's due time
  when none was sent);
- the decisive ops it judged (the last JUDGED_MEMORY, in the order judged), so that a
  replayed op is ignored as the stage would;
- ops that landed and were never judged (their batch was cut short by a crash): pending, so
  the stage judges them at its first timer (TransactionProcessor's wake-up) and writes
  what is missing; a key without a half keeps its waiting ops as the stage does, with the
  timer that gives up on them.

Times the warehouse does not record are taken from what it does: a decision's time is when
its row was written (the stage counts from the watermark, at most a batch earlier), so a
derived timer is never earlier than the stage's, and at most about a batch later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from coordinator.core.state_machine import Event, TransactionState, Verdict
from delta_tables.columns import MESSAGE
from streams.stage.lifecycle import Rules

#: The kinds of history rows (column `source`), one per table.
HALF, OP, CHECK, FINAL, VERDICT, DELIVERY = "half", "op", "check", "final", "verdict", "delivery"
# The names rows carry, from coordinator/core/state_machine.py (one home for them).
COMMIT, ROLLBACK, RESUME = Event.COMMIT.value, Event.ROLLBACK.value, Event.RESUME.value
PREPARED, CHECKING = TransactionState.PREPARED.name, TransactionState.CHECKING.name
COMMITTED, ROLLED_BACK = TransactionState.COMMITTED.name, TransactionState.ROLLED_BACK.name
DISCARDED = TransactionState.DISCARDED.name
APPLIED, NO_EFFECT, ORPHAN = Verdict.APPLIED.value, Verdict.NO_EFFECT.value, Verdict.ORPHAN.value
#: The verdict detail of an op that came before any half (it is not judged against one).
NO_HALF_YET = "no half yet"
JUDGED_MEMORY = 8  # streams/jvm/txcoord/Lifecycle.java JUDGED_MEMORY

#: A half as the stage keeps it: the message's columns, its immunity and store time.
HALF_FIELDS = (*(field.name for field in MESSAGE), "check_immunity_seconds", "stored_ms")
OP_FIELDS = (
    "op_id",
    "transaction_id",
    "producer_group",
    "op",
    "from_check",
    "operator",
    "reason",
    "stored_ms",
)

Row = Mapping[str, Any]
State = dict[str, Any]


def _half(row: Row) -> dict[str, Any]:
    """The stage's half of a `half` row: properties as sorted (key, value) pairs."""
    half = {name: row.get(name) for name in HALF_FIELDS}
    properties = row.get("properties") or {}
    pairs = properties.items() if isinstance(properties, Mapping) else properties
    half["properties"] = [
        {"key": str(k), "value": str(v)} for k, v in sorted((str(k), str(v)) for k, v in pairs)
    ]
    half["keys"] = list(row.get("keys") or [])
    half["body"] = bytes(row.get("body") or b"")
    return half


def _op(row: Row) -> dict[str, Any]:
    op = {name: row.get(name) for name in OP_FIELDS}
    op["from_check"] = bool(row.get("from_check"))
    return op


def _op_order(op: Row) -> tuple[int, str]:
    return int(op["stored_ms"]), str(op["op_id"])


def _first_check_due(half: Row, rules: Rules) -> int:
    immunity_ms = min((half["check_immunity_seconds"] or 0) * 1000, rules.max_check_immunity_ms)
    return int(half["stored_ms"]) + max(rules.timeout_ms, immunity_ms)


def _live_timer(half: Row, due_ms: int, rules: Rules) -> int:
    return min(due_ms, int(half["stored_ms"]) + rules.file_reserved_ms)


def _at(row: Row) -> tuple[int, int]:
    """When a row was written: its batch's time (the stage's clock, which only grows, also
    across checkpoints whose batch ids start again at 0), then its batch id."""
    return int(row["at_ms"]), int(row["batch_id"])


def derive(history: Iterable[Row], rules: Rules, now_ms: int) -> State | None:
    """Return the stage's state of one transaction from its rows of the warehouse, or None
    when the stage keeps nothing of it (forgotten, or never anything to keep).

    Each row has `source` (HALF, OP, CHECK, FINAL, VERDICT, DELIVERY) and its table's fields:
    HALF_FIELDS; OP_FIELDS; check_number, at_ms, batch_id; state, check_count,
    deciding_op_id, at_ms, batch_id; op_id, op, verdict, detail, stored_ms, at_ms, batch_id;
    op_id (the commit op), at_ms, batch_id. `now_ms` is the rebuild's time.
    """
    rows: dict[str, list[Row]] = {HALF: [], OP: [], CHECK: [], FINAL: [], VERDICT: [], DELIVERY: []}
    for row in history:
        rows[row["source"]].append(row)
    judged_ids = {v["op_id"] for v in rows[VERDICT]}
    unjudged: dict[str, dict[str, Any]] = {}
    for op in sorted(rows[OP], key=_op_order):
        if op["op_id"] not in judged_ids:
            unjudged.setdefault(op["op_id"], _op(op))
    if not rows[HALF]:
        waiting = [op for op in unjudged.values() if op["op"] in (COMMIT, ROLLBACK)]
        if not waiting:
            return None
        timer = int(waiting[0]["stored_ms"]) + rules.orphan_wait_ms
        return _state(
            None,
            None,
            check_count=0,
            deciding_op_id=None,
            pending_ops=waiting,
            timer_ms=timer,
            judged_ops=[],
        )
    half = _half(min(rows[HALF], key=lambda h: (int(h["stored_ms"]), str(h["msg_id"]))))
    judged = [
        str(v["op_id"])
        for v in sorted(rows[VERDICT], key=lambda v: (*_at(v), *_op_order(v)))
        if v["op"] in (COMMIT, ROLLBACK, RESUME)
        and v["verdict"] != ORPHAN
        and not (v["verdict"] == NO_EFFECT and v.get("detail") == NO_HALF_YET)
    ][-JUDGED_MEMORY:]
    finals = list(rows[FINAL])
    delivery = max(rows[DELIVERY], key=_at, default=None)
    if delivery is not None and not any(f["state"] == COMMITTED for f in finals):
        # Delivered, and the crash came before its outcome was written: committed.
        finals.append(
            {
                "state": COMMITTED,
                "check_count": _last_check_number(rows[CHECK], None),
                "deciding_op_id": delivery["op_id"],
                "at_ms": delivery["at_ms"],
                "batch_id": delivery["batch_id"],
            }
        )
    # Outcomes and RESUMEs alternate: only a discard is resumed, and a commit or a rollback
    # ends everything. Within one batch a discard comes before whatever follows it, and of
    # two discards (one, a RESUME, the other) the later has counted no check: after the
    # RESUME the batch's timers fire once, to send a check or to discard.
    final = max(
        finals,
        key=lambda f: (*_at(f), f["state"] != DISCARDED, -int(f["check_count"])),
        default=None,
    )
    resumes = [v for v in rows[VERDICT] if v["op"] == RESUME and v["verdict"] == APPLIED]
    resume = max(resumes, key=_at, default=None)
    if final is not None and len(resumes) < len(finals):
        pending = [op for op in unjudged.values() if op["op_id"] != final["deciding_op_id"]]
        # Counted from the decision: its batch's time, or the store time of the op that
        # decided it, or for a discard of the op that found it given up, if later (any op of
        # its batch: a discard is then kept a little longer than the stage would).
        if final["state"] == DISCARDED:
            batch = _at(final)
            deciding = [int(v["stored_ms"]) for v in rows[VERDICT] if _at(v) == batch]
        else:
            deciding = [
                int(op["stored_ms"]) for op in rows[OP] if op["op_id"] == final["deciding_op_id"]
            ]
        decided_at = max([int(final["at_ms"]), *deciding])
        return _decided(
            half,
            final,
            decided_at=decided_at,
            pending=pending,
            judged=judged,
            rules=rules,
            now_ms=now_ms,
        )
    count = _last_check_number(rows[CHECK], resume)
    if count > 0:
        last = max(rows[CHECK], key=lambda c: (*_at(c), int(c["check_number"])))
        timer = _live_timer(half, int(last["at_ms"]) + rules.check_interval_ms, rules)
    elif resume is not None:
        timer = _live_timer(half, int(resume["stored_ms"]), rules)
    else:
        timer = _live_timer(half, _first_check_due(half, rules), rules)
    state = CHECKING if count > 0 or resume is not None else PREPARED
    deciding_op = final["deciding_op_id"] if final is not None else None
    return _state(
        state,
        half,
        check_count=count,
        deciding_op_id=deciding_op,
        pending_ops=list(unjudged.values()),
        timer_ms=timer,
        judged_ops=judged,
    )


def _last_check_number(checks: list[Row], resume: Row | None) -> int:
    """Return the number of the last check sent (since `resume`, which restarts the count)."""
    if not checks:
        return 0
    last = max(checks, key=lambda c: (*_at(c), int(c["check_number"])))
    if resume is not None and _at(last) < _at(resume):
        return 0
    return int(last["check_number"])


def _decided(
    half: dict[str, Any],
    final: Row,
    *,
    decided_at: int,
    pending: list[dict[str, Any]],
    judged: list[str],
    rules: Rules,
    now_ms: int,
) -> State | None:
    """Return a decided transaction's state, None once it would be forgotten."""
    state = str(final["state"])
    if state == DISCARDED:
        timer = max(decided_at, int(half["stored_ms"]) + rules.file_reserved_ms)
    else:
        timer = decided_at + rules.resolved_retention_ms
        half = {**half, "body": b"", "keys": [], "properties": []}  # it only judges ops
    if timer <= now_ms:
        return None
    return _state(
        state,
        half,
        check_count=int(final["check_count"]),
        deciding_op_id=final["deciding_op_id"],
        pending_ops=pending,
        timer_ms=timer,
        judged_ops=judged,
    )


def _state(
    state: str | None,
    half: dict[str, Any] | None,
    *,
    check_count: int,
    deciding_op_id: str | None,
    pending_ops: list[dict[str, Any]],
    timer_ms: int | None,
    judged_ops: list[str],
) -> State:
    """Return the state row (StageRows.STATE's fields)."""
    return {
        "state": state,
        "half": half,
        "check_count": check_count,
        "deciding_op_id": deciding_op_id,
        "pending_ops": pending_ops,
        "timer_ms": timer_ms,
        "judged_ops": judged_ops,
    }
