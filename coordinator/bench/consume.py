"""The consume phase: commit→consumed beside commit→visible, for the same transactions.

A steady, light load of commits (CONSUME_RATE tx/s for `--consume-seconds`, so that batches do
not queue and the latency is the pipeline's, not a backlog's) goes to a topic of its own
while a consumer process (coordinator/bench/consumer_process.py: the SDK's SimpleConsumer,
one member) reads it. For each transaction:

- commit_to_visible_ms: the COMMIT op's acknowledgement to the Delta commit that made its
  row visible (coordinator/bench/visibility.py);
- commit_to_consumed_ms: the same acknowledgement to the moment the consumer's `receive`
  returned the message. The difference is the consumer's own latency: the engine's delivery
  notice, then a delta-rs read of the queue's new rows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from coordinator.bench.context import PhaseContext
from coordinator.bench.load import LoadProcess
from coordinator.bench.stats import summarize
from coordinator.bench.throughput import decisions_since, drive, plan_for
from coordinator.bench.visibility import latencies_ms, visible_times
from coordinator.kafka_clients.offsets_topic import ensure_offsets_topic
from delta_tables import topics

TOPIC = "BenchConsume"
GROUP = "bench-consumers"
CONSUME_RATE = 50.0
#: How long the pipeline and the consumer may take, after the last commit was sent, to make
#: every committed transaction visible and to receive it.
CATCH_UP_SECONDS = 60.0


def _written(out_file: Path) -> dict[str, Any]:
    """Return what the consumer process wrote so far (nothing yet: nothing received)."""
    try:
        found: dict[str, Any] = json.loads(out_file.read_text())
    except (OSError, ValueError):
        return {"received": {}}
    return found


def run_consume(context: PhaseContext) -> dict[str, Any]:
    """Drive the light commit load with a consumer reading; return both latencies."""
    config = context.config
    kafka = config.kafka
    out_file = context.work_dir / "consumer.json"
    settings = {
        "group": GROUP,
        "topic": TOPIC,
        "bootstrap_servers": kafka.bootstrap_servers,
        "warehouse": config.warehouse,
        "deliveries_topic": kafka.deliveries_topic,
        "offsets_topic": kafka.consumer_offsets_topic,
        "topics_per_group": kafka.topics_per_group,
    }
    if kafka.topics_per_group:  # the group's own offsets topic, made as provision makes it
        ensure_offsets_topic(kafka, GROUP)
    context.reporter.phase("starting a consumer", None)
    consumer = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "coordinator.bench.consumer_process",
            json.dumps(settings),
            str(out_file),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert consumer.stdout is not None
        if consumer.stdout.readline().strip() != "ready":
            raise RuntimeError("the bench's consumer did not start")
        run = f"b{context.stamp}-consume"
        plan = plan_for(
            context,
            "kafka",
            run,
            group="bench-consume",
            topic=TOPIC,
            mix="commit=1",
            duration=context.settings.consume_seconds,
            rate=CONSUME_RATE,
            batch=10,
        )
        context.reporter.phase("consume phase", None)
        driven = drive(LoadProcess(plan), context, decisions_since(context), "consume phase")
        committed = {
            tx: op_ack
            for tx, kind, _, op_ack in driven.load["transactions"]
            if kind == "commit" and op_ack is not None
        }
        deadline = time.monotonic() + CATCH_UP_SECONDS
        visible = visible_times(topics.table(TOPIC).path(config.warehouse))
        while time.monotonic() < deadline and not set(committed) <= set(visible):
            time.sleep(0.5)
            visible = visible_times(topics.table(TOPIC).path(config.warehouse))
        # The consumer's turn, within the same bound: until it received every committed
        # transaction (it writes what it received as it goes). A fixed 5 s stood here, and a
        # loaded gate host's consumer, still joining its group, had received none by then.
        while (
            time.monotonic() < deadline
            and not set(committed) <= _written(out_file)["received"].keys()
        ):
            if consumer.poll() is not None:
                break
            time.sleep(0.5)
        if (code := consumer.poll()) is not None:
            # It writes what it received however it ends: an exit of its own would otherwise
            # read as "consumed 0" (a gate run measured that once; its error is above, on
            # the stderr it shares with this process).
            raise RuntimeError(f"the bench's consumer exited by itself (code {code})")
    finally:
        consumer.terminate()
        consumer.wait(timeout=60)
    found = _written(out_file)
    received: dict[str, int] = found["received"]
    result: dict[str, Any] = {
        "topic": TOPIC,
        "rate_tx_per_s": CONSUME_RATE,
        "seconds": context.settings.consume_seconds,
        "committed": len(committed),
        "consumed": sum(1 for tx in committed if tx in received),
        "deliveries": found.get("deliveries", 0),
        "commit_to_visible_ms": summarize(latencies_ms(committed, visible)),
        "commit_to_consumed_ms": summarize(latencies_ms(committed, received)),
    }
    if result["consumed"] < result["committed"]:
        # Why: the consumer's view of its group and queues as it stopped, and its group log.
        result["consumer_state"] = found.get("state")
        result["consumer_log"] = f"{out_file}.log"
    return result
