"""One path's throughput phase: drive the load, wait for every decision, then judge it.

The load of the Kafka and REST paths is a Python child process (load.py); the gRPC path's is
RocketMQ's Java client in a JVM (grpc_driver.py), whose transaction ids in the warehouse are
the client's message ids, read back as the bench's (its messages' keys).

Numbers, each labelled by what it measures:

- offered_tx_per_s: transactions sent (half and op acknowledged) per second of sending;
- sustained_tx_per_s: transactions reaching a final state per second, between the moments
  10% and 90% of the phase's transactions were decided (skips ramp-up and the drain of the
  last checked ones; the in-flight window keeps sending closed-loop, so this is a rate the
  coordinator keeps up with, not one a backlog absorbs). When the run was too short for a
  steady state (fewer than 4 steps of decisions between the marks), the decisions at the
  90% mark over the time from the first send: `sustained_method` says which;
- end_to_end_tx_per_s: all transactions / (last decision - first send);
- in_flight_median: sent minus decided while sending (with the latency, Little's law:
  throughput ~ in flight / latency, so a saturated closed loop shows the window's latency);
- commit_to_visible_ms: a COMMIT op's acknowledgement to its row's Delta commit in
  topics/<topic> (for checked and rechecked commits: the COMMIT answer's acknowledgement; on
  the gRPC path the return of the Java client's commit(), and its checker's COMMIT answer);
- check_timeliness_ms: first check's requested_at - prepared_at - transaction_timeout, as the
  coordinator recorded it, and as the producer received it;
- later_check_timeliness_ms: check n's (n >= 2) requested_at - requested_at(n-1) -
  transaction_check_interval, as recorded, and as received (the producer's receipt of check n
  instead of its requested_at): the rechecked kind's second checks, and any other recheck.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from coordinator.bench.batches import where_time_went
from coordinator.bench.context import PhaseContext
from coordinator.bench.grpc_driver import GrpcLoad, GrpcPlan
from coordinator.bench.jit import Settling, compile_seconds, spent
from coordinator.bench.load import LoadPlan, LoadProcess
from coordinator.bench.outcomes import (
    Select,
    final_states,
    first_check_delays_ms,
    judge,
    later_check_delays_ms,
    prepared_at_ms,
    requested_at_ms,
)
from coordinator.bench.stats import median, summarize, sustained_rate
from coordinator.bench.visibility import latencies_ms, visible_times
from coordinator.bench.workload import kind_of
from coordinator.core.state_machine import Event
from coordinator.core.state_machine import TransactionState as State
from coordinator.core.topics import check_consumer_group
from coordinator.kafka_clients.options import COMMITTED_ONLY
from delta_tables import topics

TOPICS = {"kafka": "BenchKafka", "rest": "BenchRest", "grpc": "BenchGrpc"}
POLL_SECONDS = 0.25


@dataclass
class Driven:
    """What the parent saw while a load ran."""

    load: dict[str, Any]  # the load process's results
    series: list[tuple[float, int, int]]  # (epoch s, sent, decided)
    all_decided_at: float | None  # epoch s


def decisions_since(context: PhaseContext) -> Callable[[], int]:
    """Return a counter of the final states the engine recorded from now on."""
    base = context.engine.tally.snapshot().finals
    return lambda: context.engine.tally.snapshot().finals - base


def drive(
    load: LoadProcess | GrpcLoad,
    context: PhaseContext,
    decided: Callable[[], int],
    label: str,
    *,
    expect: Callable[[int], int] = lambda sent: sent,
    enough: Callable[[int], bool] | None = None,
) -> Driven:
    """Run `load` to the end: feed its window, wait until `expect(sent)` are decided.

    `enough`, if given, is asked at every poll with the count decided; once it says True the
    load sends no more (its plan ends early) and the phase waits for what it sent.
    """
    settings, reporter = context.settings, context.reporter
    series: list[tuple[float, int, int]] = []
    done_at: float | None = None
    all_decided_at: float | None = None
    tally = context.engine.tally
    version = tally.version
    load.start()
    next_poll = time.monotonic() + POLL_SECONDS
    while True:
        # The window learns each batch's decisions as soon as they are written: a poll
        # interval of lag would be the bench's own latency in a closed loop. The series
        # (and everything judged on it) is still sampled every POLL_SECONDS.
        version = tally.wait_past(version, max(next_poll - time.monotonic(), 0.0))
        count = decided()
        load.tell_decided(count)
        if time.monotonic() < next_poll:
            continue
        next_poll = time.monotonic() + POLL_SECONDS
        now, sent = time.time(), load.sent
        series.append((now, sent, count))
        if enough is not None and not load.sending_done and enough(count):
            load.stop_sending()
            enough = None
        problems = context.engine.problems()
        if problems:
            load.finish(10)
            raise RuntimeError("; ".join(problems))
        if done_at is None and load.sending_done:
            done_at, sent = now, load.sent
        stage = "draining" if done_at else "sending"
        reporter.update(count, f"{label}: {stage}, sent {sent:,}, decided {count:,}")
        if done_at is not None and count >= expect(sent):
            all_decided_at = now
            break
        if done_at is not None and now - done_at > settings.drain_timeout:
            reporter.note(
                f"{label}: {expect(sent) - count:,} undecided after "
                f"{settings.drain_timeout:.0f} s of draining; judging as is"
            )
            break
        if not load.alive() and not load.sending_done:
            break  # finish() raises with the child's error
    return Driven(load.finish(), series, all_decided_at)


def plan_for(context: PhaseContext, path: str, run: str, **fields: Any) -> LoadPlan:
    """Return a load plan against the context's engine (and REST ingress for `rest`)."""
    kafka = context.config.kafka
    rest = context.config.rest
    return LoadPlan(
        path=path,
        run=run,
        out_file=str(context.work_dir / f"load-{run}.json"),
        bootstrap_servers=kafka.bootstrap_servers,
        half_topic=kafka.half_topic,
        op_topic=kafka.op_topic,
        check_topic=kafka.check_topic,
        rest_endpoint=f"http://{rest.host}:{rest.port}",
        **fields,
    )


def skip_earlier_checks(bootstrap_servers: str, check_topic: str, consumer_group: str) -> None:
    """Start the check consumers of `consumer_group` at the check topic's end (before its load
    sends).

    The SDK's consumers of a new group read the shared check topic from its start (never
    miss a check); in the bench the topic already holds every check of the warm-up (about
    a tenth of its transactions, 10^5 records after a few minutes), which the path's
    producers would skim first on the two cores they share with the engine.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=consumer_group,
        enable_auto_commit=False,
        **COMMITTED_ONLY,  # its end offsets: the last stable ones, as the SDK's reader sees
    )
    try:
        partitions = [
            TopicPartition(check_topic, number)
            for number in consumer.partitions_for_topic(check_topic) or ()
        ]
        ends = consumer.end_offsets(partitions)
        consumer.commit({tp: OffsetAndMetadata(end, "", -1) for tp, end in ends.items()})
    finally:
        consumer.close()


def grpc_load(context: PhaseContext, run: str) -> GrpcLoad:
    """Return the gRPC path's load: RocketMQ's Java client against the context's endpoint.

    The endpoint runs open (the bench gives it no auth file), so the producer group is named
    like the topic (docs/rocketmq.md); its check consumers skip the warm-up's checks, as the
    Kafka path's do.
    """
    # Imported here: gRPC and RocketMQ's protocol load only when the gRPC path runs.
    from coordinator.rocketmq.server import consumer_group_of  # noqa: PLC0415

    settings, config = context.settings, context.config
    topic = TOPICS["grpc"]
    skip_earlier_checks(
        config.kafka.bootstrap_servers, config.kafka.check_topic, consumer_group_of(topic)
    )
    return GrpcLoad(
        GrpcPlan(
            endpoint=f"{config.grpc.host}:{config.grpc.port}",
            topic=topic,
            run=run,
            mix=settings.mix,
            out_file=context.work_dir / f"load-{run}.tsv",
            home=context.work_dir / f"grpc-load-{run}",
            count=settings.count,
            duration=settings.duration,
            window=settings.window,
            rate=settings.rate,
            senders=settings.grpc_senders,
        )
    )


def run_path(context: PhaseContext, path: str) -> dict[str, Any]:
    """Drive one path with the settings' mix; return its judged numbers."""
    settings = context.settings
    run = f"b{context.stamp}-{path}"
    if path == "grpc":
        context.reporter.phase(f"{path} path", settings.count)
        load = grpc_load(context, run)
        driven = drive(load, context, decisions_since(context), f"{path} path")
        return judge_path(context, path, run, driven)
    plan = plan_for(
        context,
        path,
        run,
        group=f"bench-{path}",
        topic=TOPICS[path],
        mix=settings.mix,
        count=settings.count,
        duration=settings.duration,
        window=settings.window,
        rate=settings.rate,
        batch=settings.batch,
        senders=1 if path == "kafka" else 2,
    )
    if path == "kafka":  # the REST path's checks are read by group from a table
        skip_earlier_checks(
            plan.bootstrap_servers, plan.check_topic, check_consumer_group(plan.group)
        )
    context.reporter.phase(f"{path} path", settings.count)
    driven = drive(LoadProcess(plan), context, decisions_since(context), f"{path} path")
    return judge_path(context, path, run, driven)


def warm_up(context: PhaseContext) -> dict[str, Any]:
    """Drive the mix through the Kafka path until the engine is warm, and wait for it all.

    A fresh engine's first batches pay for code generation, the first commits of every
    table and, for a minute or two under load, the JIT compiling the Spark JVM's hot methods
    (coordinator/bench/jit.py); measuring them would charge a one-time cost to the steady
    state. The warm-up sends at least `warmup` transactions, then goes on at full speed until
    the compilers have settled or `warmup_max_seconds` have passed (0: `warmup` only).
    """
    settings = context.settings
    spark = context.engine.spark
    run = f"w{context.stamp}"
    longest = settings.warmup_max_seconds
    sizing: dict[str, Any] = {"duration": longest} if longest > 0 else {"count": settings.warmup}
    plan = plan_for(
        context,
        "kafka",
        run,
        group="bench-warmup",
        topic="BenchWarmup",
        mix=settings.mix,
        window=settings.window,
        batch=settings.batch,
        **sizing,
    )
    context.reporter.phase("warm-up", None if longest > 0 else settings.warmup)
    settling = Settling()
    started = time.time()
    compiled_before = compile_seconds(spark)

    def warm(decided: int) -> bool:
        compiled = compile_seconds(spark)
        if compiled is None:  # no way to tell: the count alone decides
            return decided >= settings.warmup
        settling.observe(time.monotonic(), compiled)
        return decided >= settings.warmup and settling.settled()

    driven = drive(
        LoadProcess(plan),
        context,
        decisions_since(context),
        "warm-up",
        enough=warm if longest > 0 else None,
    )
    decided = driven.series[-1][2] if driven.series else 0
    share = settling.recent_share()
    return {
        "transactions": decided,
        "decided": decided,
        "seconds": round(time.time() - started, 1),
        "jit_settled": settling.settled() if longest > 0 else None,
        "jit_share_at_end": None if share is None else round(share, 3),
        "jit_compile_seconds": spent(compiled_before, compile_seconds(spark)),
    }


def idle(context: PhaseContext, seconds: float, name: str = "idle engine") -> dict[str, Any]:
    """Watch the engine with no load at all: what its batches cost when nothing happens."""
    context.reporter.phase(f"{name} ({seconds:g} s)", None)
    started = time.time()
    time.sleep(seconds)
    batches = context.recorder.between(started, time.time())
    return {"seconds": seconds, "where_time_went": where_time_went(batches)}


def wait_to_rest(context: PhaseContext) -> float:
    """Wait until the engine's ticker rests (no timer near: streams/kafka_io/tick_pace.py); return
    the seconds waited. Raise if it is still busy well after its horizon."""
    pace = context.engine.pace
    context.reporter.phase("waiting for the ticker to rest", None)
    started = time.monotonic()
    deadline = started + pace.horizon + pace.margin + 60
    while pace.busy():
        if time.monotonic() > deadline:
            raise RuntimeError("the engine's ticker was still busy long after the last load")
        time.sleep(0.5)
    return round(time.monotonic() - started, 1)


def _relative(driven: Driven, origin: float) -> list[tuple[float, int, int]]:
    return [(round(at - origin, 2), sent, count) for at, sent, count in driven.series]


def judge_path(context: PhaseContext, path: str, run: str, driven: Driven) -> dict[str, Any]:
    """Return the numbers of one driven path, read back from the warehouse."""
    warehouse = context.config.warehouse
    load = driven.load
    sent = [row[0] for row in load["transactions"]]
    # The gRPC path's transaction ids are the Java client's message ids: read as the bench's.
    ids: dict[str, str] | None = load.get("ids")
    select: Select = f"{run}-" if ids is None else ids
    verdict = judge(sent, final_states(warehouse, select))
    visible = visible_times(topics.table(TOPICS[path]).path(warehouse))
    if ids is not None:
        visible = {ids[tx]: at for tx, at in visible.items() if tx in ids}
    commit_acks = {
        tx: op_ack
        for tx, kind, _, op_ack in load["transactions"]
        if kind == "commit" and op_ack is not None
    }
    responder = load.get("responder") or {}
    if ids is not None:  # the Java checker sees no store time: the warehouse has it
        prepared = prepared_at_ms(warehouse, ids)
        for tx, first in responder.get("first_checks", {}).items():
            first[1] = prepared.get(tx)
    answer_acks = {
        tx: at
        for tx, (op, at) in (responder.get("answers") or {}).items()
        if op == Event.COMMIT and (k := kind_of(tx)) is not None and k.checked
    }
    rolled_back = State.ROLLED_BACK.name
    never_visible = [tx for tx in sent if (k := kind_of(tx)) and k.expected_state == rolled_back]
    timeout_ms = int(context.config.transaction_timeout.total_seconds() * 1000)
    received = [
        float(at - prepared - timeout_ms)
        for at, prepared, _ in (responder.get("first_checks") or {}).values()
        if prepared is not None
    ]
    later = later_check_timeliness(context, select, responder)
    started = load["send_started_ms"] / 1000
    finished = load["send_finished_ms"] / 1000
    series = [(at - started, count) for at, _, count in driven.series]
    sustained, window_s, method = sustained_rate(series, len(sent))
    in_flight = [n - count for at, n, count in driven.series if at <= finished]
    end = driven.all_decided_at or driven.series[-1][0]
    return {
        "path": path,
        "topic": TOPICS[path],
        "transactions": verdict,
        "visible_rolled_back": sum(1 for tx in never_visible if tx in visible),
        "send_seconds": round(finished - started, 2),
        "drain_seconds": round(end - finished, 2),
        # When (epoch s) the load began and the last transaction was decided: the engine's
        # work, without the judging that reads the tables back afterwards.
        "driven_between_s": [round(started, 3), round(end, 3)],
        "offered_tx_per_s": round(len(sent) / (finished - started), 1)
        if finished > started
        else None,
        "sustained_tx_per_s": round(sustained, 1) if sustained else None,
        "sustained_window_s": round(window_s, 2) if window_s else None,
        "sustained_method": method,
        "in_flight_median": median(in_flight),
        "end_to_end_tx_per_s": round(len(sent) / (end - started), 1) if end > started else None,
        "commit_to_visible_ms": summarize(latencies_ms(commit_acks, visible)),
        "checked_commit_to_visible_ms": summarize(latencies_ms(answer_acks, visible)),
        "check_timeliness_ms": {
            "recorded": summarize(first_check_delays_ms(warehouse, select, timeout_ms)),
            "received_by_producer": summarize(received),
        },
        "later_check_timeliness_ms": later,
        "responder": {
            k: v for k, v in responder.items() if k not in ("answers", "first_checks", "arrivals")
        },
        # The gRPC path's: its Java client's own latencies, and its sender threads.
        **{key: load[key] for key in ("client_latency_ms", "senders") if key in load},
        "load_process": {
            "cpu_seconds": load["cpu_seconds"],
            "peak_rss_bytes": load["peak_rss_bytes"],
        },
        "where_time_went": where_time_went(context.recorder.between(started, end)),
        "series": _downsample(_relative(driven, started)),
    }


def later_check_timeliness(
    context: PhaseContext, select: Select, responder: dict[str, Any]
) -> dict[str, Any]:
    """Return the summaries of later checks' lateness, recorded and received by the producer.

    Check n-1's requested_at is the producer's own copy (its check request carries it), else
    the warehouse's.
    """
    interval_ms = int(context.config.transaction_check_interval.total_seconds() * 1000)
    recorded = requested_at_ms(context.config.warehouse, select)
    received: dict[tuple[str, int], int] = {}
    requested = dict(recorded)
    for tx, number, at, requested_at in responder.get("arrivals") or ():
        received[(tx, number)] = at
        if requested_at is not None:
            requested[(tx, number)] = requested_at
    return {
        "recorded": summarize(later_check_delays_ms(recorded, recorded, interval_ms)),
        "received_by_producer": summarize(later_check_delays_ms(received, requested, interval_ms)),
    }


def _downsample(rows: list[tuple[float, int, int]], most: int = 400) -> list[list[float]]:
    step = max(len(rows) // most, 1)
    kept = rows[::step]
    if rows and kept[-1] != rows[-1]:
        kept.append(rows[-1])
    return [list(row) for row in kept]
