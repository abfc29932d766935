"""The JVM twin of the rules agrees with tests/reference/lifecycle.py on random histories.

The coordinator's stage runs `txcoord.Lifecycle` (streams/jvm/), a port of the reference
model tests/reference/lifecycle.py. Hypothesis draws histories of one transaction: batches of
halves and ops (duplicates, either side first, every op kind, operators), timers, and
restarts (the JVM state goes through the bytes the processor keeps and back), with the
watermark and the batch time moving as they do in the stream. Both sides must emit the same
rows and keep the same state after every step.
"""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from streams.stage.lifecycle import Rules
from streams.stage.processor import transitions_table
from tests.reference.lifecycle import Emit, Half, Op, Step, TxState, on_input, on_timer

S = 1000
T0 = 1_800_000_000_000
RULES = Rules(
    timeout_ms=6 * S,
    check_interval_ms=10 * S,
    check_max=3,
    file_reserved_ms=120 * S,
    resolved_retention_ms=30 * S,
    orphan_wait_ms=20 * S,
    max_check_immunity_ms=50 * S,
)
TX, GROUP = "tx-1", "orders"


# -- drawing rule settings -------------------------------------------------------------------
@st.composite
def rule_sets(draw: st.DrawFn) -> Rules:
    """Draw the configuration too: the twin reads every setting, so every one is varied.

    Within what the configuration allows (coordinator/core/config.py): the expiry and the largest
    immunity are never below the timeout, and an orphan waits 2 x timeout + 10 s in the
    product (streams/query/decision_query.py:rules_of), varied here around that. The histories'
    steps (0-130 s) cross every one of these timers.
    """
    timeout = draw(st.integers(1, 12)) * S
    return Rules(
        timeout_ms=timeout,
        check_interval_ms=draw(st.integers(1, 40)) * S,
        check_max=draw(st.integers(1, 4)),
        file_reserved_ms=timeout + draw(st.integers(10, 200)) * S,
        resolved_retention_ms=draw(st.integers(5, 60)) * S,
        orphan_wait_ms=2 * timeout + draw(st.integers(0, 20)) * S,
        max_check_immunity_ms=timeout + draw(st.integers(0, 80)) * S,
    )


# -- drawing histories ---------------------------------------------------------------------
@st.composite
def halves(draw: st.DrawFn, now: int) -> list[Half]:
    count = draw(st.integers(0, 2))
    found = []
    for _ in range(count):
        found.append(
            Half(
                transaction_id=TX,
                msg_id=f"m-{draw(st.integers(0, 3))}",
                producer_group=GROUP,
                topic="OrderPaid",
                queue_id=draw(st.integers(0, 3)),
                body=draw(st.binary(max_size=8)),
                keys=tuple(draw(st.lists(st.sampled_from(["k1", "k2", "ключ"]), max_size=2))),
                tags=draw(st.none() | st.just("tag")),
                properties=tuple(
                    sorted(
                        draw(
                            st.dictionaries(
                                st.sampled_from("ab"), st.sampled_from("xy"), max_size=2
                            )
                        ).items()
                    )
                ),
                check_immunity_seconds=draw(st.none() | st.integers(0, 80)),
                stored_ms=now + draw(st.integers(-20 * S, 10 * S)),
            )
        )
    return found


@st.composite
def ops(draw: st.DrawFn, now: int) -> list[Op]:
    found = []
    for _ in range(draw(st.integers(0, 3))):
        operator = draw(st.none() | st.just("alice"))
        kinds = ["COMMIT", "ROLLBACK", "UNKNOWN"] + (["RESUME"] if operator else [])
        found.append(
            Op(
                op_id=f"op-{draw(st.integers(0, 9)):02d}",
                transaction_id=TX,
                producer_group=GROUP,
                op=draw(st.sampled_from(kinds)),
                from_check=draw(st.booleans()),
                operator=operator,
                reason="why" if operator else None,
                stored_ms=now + draw(st.integers(-20 * S, 15 * S)),
            )
        )
    return found


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    now = T0
    steps: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 14))):
        now += draw(st.sampled_from([0, 1, 2, 5, 9, 11, 30, 130])) * S + draw(st.integers(0, 999))
        wall = now + draw(st.integers(0, 4 * S))
        kind = draw(st.sampled_from(["input", "input", "timer", "timer", "restart"]))
        step: dict[str, Any] = {"kind": kind, "now": now, "wall": wall}
        if kind == "input":
            step["halves"] = draw(halves(now))
            step["ops"] = draw(ops(now))
        steps.append(step)
    return steps


# -- the reference model's side, in the twin's JSON shape ----------------------------------
def half_json(half: Half | None) -> dict[str, Any] | None:
    if half is None:
        return None
    raw = asdict(half)
    raw["body"] = base64.b64encode(half.body).decode()
    raw["keys"] = list(half.keys)
    raw["properties"] = [list(pair) for pair in half.properties]
    return raw


def op_json(op: Op | None) -> dict[str, Any] | None:
    return None if op is None else asdict(op)


def emit_json(emit: Emit) -> dict[str, Any]:
    return {
        "kind": emit.kind.value, "transaction_id": emit.transaction_id, "at_ms": emit.at_ms,
        "half": half_json(emit.half), "check_number": emit.check_number,
        "state": emit.state.name if emit.state is not None else None, "reason": emit.reason,
        "op": op_json(emit.op), "verdict": emit.verdict, "detail": emit.detail,
        "check_count": emit.check_count, "deciding_op_id": emit.deciding_op_id,
    }  # fmt: skip


def state_json(state: TxState | None) -> dict[str, Any] | None:
    if state is None:
        return None
    return {
        "state": state.state.name if state.state is not None else None,
        "half": half_json(state.half), "check_count": state.check_count,
        "deciding_op_id": state.deciding_op_id,
        "pending_ops": [op_json(op) for op in state.pending_ops],
        "timer_ms": state.timer_ms, "judged_ops": list(state.judged_ops),
    }  # fmt: skip


def due(state: TxState, now: int) -> bool:
    return state.timer_ms is not None and state.timer_ms <= now


def run_model(steps: list[dict[str, Any]], rules: Rules = RULES) -> list[dict[str, Any]]:
    """Run a history through tests/reference/lifecycle.py, the way Twin.java runs it."""
    state: TxState | None = None
    out = []
    for step in steps:
        result = Step(state)
        if step["kind"] == "input":
            result = on_input(
                state, step["halves"], step["ops"], step["now"], rules, wall_ms=step["wall"]
            )
        elif step["kind"] == "timer" and state is not None and due(state, step["now"]):
            result = on_timer(state, step["now"], rules, wall_ms=step["wall"])
        state = result.state
        out.append({"emits": [emit_json(e) for e in result.emits], "state": state_json(state)})
    return out


def run_twin(
    spark: SparkSession, steps: list[dict[str, Any]], rules: Rules = RULES
) -> list[dict[str, Any]]:
    """Run a history through the JVM twin (txcoord.Twin)."""
    history = {
        "rules": asdict(rules),
        "transitions": transitions_table(),
        "steps": [
            {**step, "halves": [half_json(h) for h in step.get("halves", [])],
             "ops": [op_json(o) for o in step.get("ops", [])]}
            for step in steps
        ],
    }  # fmt: skip
    twin = spark._jvm.txcoord.Twin  # type: ignore[union-attr]
    result: list[dict[str, Any]] = json.loads(twin.run(json.dumps(history)))
    return result


@pytest.fixture(scope="module")
def jvm(spark: SparkSession) -> SparkSession:
    """The test session, whose JVM has the stage's jar (spark.jars, from the install step)."""
    return spark


@settings(
    max_examples=400,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(rules=rule_sets(), steps=histories())
def test_the_jvm_twin_agrees_with_the_model(
    jvm: SparkSession, rules: Rules, steps: list[dict[str, Any]]
) -> None:
    model = run_model(steps, rules)
    twin = run_twin(jvm, steps, rules)
    for index, (expected, got) in enumerate(zip(model, twin, strict=True)):
        assert got == expected, f"step {index} ({steps[index]['kind']}) differs"


def test_the_histories_reach_every_kind_of_row(jvm: SparkSession) -> None:
    """The comparison is not vacuous: a hand-made history emits every kind through both."""
    half = Half(TX, "m-1", GROUP, "OrderPaid", 1, b"b", ("k",), None, (("a", "x"),), None, T0)
    commit = Op("op-01", TX, GROUP, "COMMIT", True, None, None, T0 + 30 * S)
    late = Op("op-02", TX, GROUP, "ROLLBACK", False, None, None, T0 + 200 * S)
    steps = [
        {"kind": "input", "now": T0, "wall": T0 + S, "halves": [half], "ops": []},
        *[{"kind": "timer", "now": T0 + n * 11 * S, "wall": T0 + n * 11 * S} for n in range(1, 6)],
        {"kind": "restart", "now": T0 + 70 * S, "wall": T0 + 70 * S},
        {"kind": "input", "now": T0 + 71 * S, "wall": T0 + 71 * S, "halves": [],
         "ops": [commit, late]},
    ]  # fmt: skip
    model = run_model(steps)
    assert model == run_twin(jvm, steps)
    kinds = {emit["kind"] for result in model for emit in result["emits"]}
    assert kinds == {"CHECK", "DISCARD", "FINAL", "VERDICT"}
    verdicts = {emit["verdict"] for result in model for emit in result["emits"]}
    assert "LATE" in verdicts
