"""Batch time against pending state: how the coordinator's batches grow with unresolved ones.

On a fresh engine of its own (own topics, warehouse and checkpoints, so no remembered
decisions of the throughput phases sit in its state), for each level in ascending order
(e.g. 0 as a baseline, then 10^4, 10^5, 10^6; cumulative):

1. preload halves, without ops, up to the level, each with check_immunity_seconds of a
   day (the phase's own engine raises `max_check_immunity` to allow it): they stay
   PREPARED and sit in the coordinator's state (first in the join's, then, ~2 x
   transaction_timeout later, in the stage's, with a timer) for the whole phase;
2. wait until they landed and passed the join;
3. run a steady small load (commits at `pending_rate` tx/s for `pending_window` seconds)
   and record every coordinator batch from its first send to its last decision: duration,
   phases, the state rows Spark reports (all stateful operators), and the steady commits'
   commit-to-visible;
4. time `txcoord state rebuild` of that state, from the checkpoint and from the warehouse
   (rebuild.py), unless `rebuild` is off.
"""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from coordinator.bench.batches import where_time_went
from coordinator.bench.context import PhaseContext
from coordinator.bench.load import LoadProcess
from coordinator.bench.rebuild import measure_rebuilds
from coordinator.bench.stats import median, summarize
from coordinator.bench.throughput import decisions_since, drive, plan_for
from coordinator.bench.visibility import latencies_ms, visible_times
from coordinator.core.config import Config
from coordinator.runtime.engine import Engine
from delta_tables import topics
from streams.query.decision_query import QUERY_NAME as COORDINATOR

TOPIC = "BenchPending"
GROUP = "bench-pending"
#: A day: far beyond the phase, well inside file_reserved_time (72 h), so never checked.
#: Above the default max_check_immunity (1 h), which the phase's own engine raises to it.
IMMUNITY_SECONDS = 86_400


def pending_config(config: Config, work_dir: Path) -> Config:
    """Return the configuration of the pending phase's own engine."""
    kafka = config.kafka
    return replace(
        config,
        max_check_immunity=max(
            config.max_check_immunity,
            min(timedelta(seconds=IMMUNITY_SECONDS), config.file_reserved_time),
        ),
        warehouse=str(work_dir / "warehouse-pending"),
        kafka=replace(
            kafka,
            half_topic=f"{kafka.half_topic}.pending",
            op_topic=f"{kafka.op_topic}.pending",
            check_topic=f"{kafka.check_topic}.pending",
        ),
        streams=replace(config.streams, checkpoint_dir=str(work_dir / "checkpoints-pending")),
    )


def _wait(context: PhaseContext, what: str, ready: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"pending phase: timed out after {timeout:.0f} s waiting for {what}")
        problems = context.engine.problems()
        if problems:
            raise RuntimeError("; ".join(problems))
        time.sleep(0.5)


def _preload(context: PhaseContext, count: int, level: int, halves_expected: int) -> float:
    """Send `count` halves that stay unresolved; return when they had passed the join."""
    run = f"p{context.stamp}-pre{level}"
    plan = plan_for(
        context,
        "kafka",
        run,
        group=GROUP,
        topic=TOPIC,
        mix="commit=1",
        count=count,
        window=None,
        batch=2000,
        immunity_seconds=int(context.config.max_check_immunity.total_seconds()),
    )
    context.reporter.phase(f"pending {level:,}: preload", count)
    drive(
        LoadProcess(plan), context, lambda: 0, f"pending {level:,} preload", expect=lambda sent: 0
    )
    tally = context.engine.tally
    _wait(
        context,
        f"{halves_expected:,} halves to land",
        lambda: tally.snapshot().halves >= halves_expected,
        600,
    )
    landed = time.time()
    timeout = context.config.transaction_timeout.total_seconds()
    # The join releases an unmatched half ~2T after it was stored; one more batch after that.
    time.sleep(2 * timeout + 3)
    return landed


def run_pending(context: PhaseContext) -> tuple[dict[str, Any], Engine]:
    """Measure each level; return them with what they mean, and the engine now running (a
    rebuild, rebuild.py, starts a new one)."""
    settings = context.settings
    levels = sorted(set(settings.pending))
    loaded = 0
    halves = context.engine.tally.snapshot().halves
    results: list[dict[str, Any]] = []
    acks: list[dict[str, int]] = []  # per level: the steady commits' acknowledgements
    for level in levels:
        if level > loaded:
            halves += level - loaded
            _preload(context, level - loaded, level, halves)
            loaded = level
        run = f"p{context.stamp}-l{level}"
        plan = plan_for(
            context,
            "kafka",
            run,
            group=GROUP,
            topic=TOPIC,
            mix="commit=1",
            duration=settings.pending_window,
            rate=settings.pending_rate,
            window=10_000,
            batch=100,
        )
        context.reporter.phase(f"pending {level:,}: steady load", None)
        driven = drive(LoadProcess(plan), context, decisions_since(context), f"pending {level:,}")
        halves += len(driven.load["transactions"])
        started = driven.load["send_started_ms"] / 1000
        acks.append({tx: op for tx, _, _, op in driven.load["transactions"] if op is not None})
        # The batches that carried the steady load: from its first send to its last decision.
        window = context.recorder.between(started, driven.all_decided_at or time.time())
        coordinator = [b for b in window if b["query"] == COORDINATOR]
        results.append(
            {
                "pending": level,
                "steady_transactions": len(acks[-1]),
                "state_rows_median": median([b["state_rows"] for b in coordinator]),
                "coordinator_batch_ms": summarize([b["duration_ms"] for b in coordinator], 0),
                "where_time_went": where_time_went(window),
            }
        )
        if settings.rebuild and level > 0:
            rebuilt, engine = measure_rebuilds(context, level)
            context = replace(context, engine=engine)
            results[-1]["rebuild"] = rebuilt
    visible = visible_times(topics.table(TOPIC).path(context.config.warehouse))
    for measured, acked in zip(results, acks, strict=True):
        measured["commit_to_visible_ms"] = summarize(latencies_ms(acked, visible))
    immunity = context.config.max_check_immunity.total_seconds()
    return {
        "what": "coordinator batch duration while N transactions stay unresolved (preloaded "
        f"halves with check_immunity_seconds={immunity:.0f}), under a steady "
        f"{settings.pending_rate:g} tx/s of commits for {settings.pending_window:g} s (batches "
        "from its first send to its last decision); "
        "state_rows is Spark's count over every stateful operator (join buffers + "
        "the transaction stage), so it includes the steady load's own keys",
        "levels": results,
        "rebuild": "after each level but 0: seconds of txcoord state rebuild from the "
        "checkpoint, then from the warehouse alone (the session reused; its start excluded)",
    }, context.engine
