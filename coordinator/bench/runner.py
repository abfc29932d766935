"""One benchmark run, start to end, on components of its own.

Order: a fresh KRaft broker and warehouse in a folder of the run's own; a local Spark
session; the engine (ticker, decision query) in this process, as `txcoord up` runs it,
with the REST ingress on a thread when the REST path is measured and the RocketMQ gRPC endpoint
when the gRPC path is; then

1. a warm-up load, an idle look at the engine (its ticker still ticking every second), a
   look at it resting (once the ticker has slowed down: streams/kafka_io/tick_pace.py), then each
   path's throughput phase (throughput.py), one after the other on the same engine;
2. the pending-state phase on a fresh engine of its own (pending.py);
3. the ceiling (ceiling.py) and the peers (peer.py: kafka-python; java_peer.py: Kafka's
   ProducerPerformance), with the engines stopped, so none competes with the coordinator
   for the machine's cores.

Everything is stopped in reverse order, whatever fails; the run folder is removed unless
`state_dir` was given. The result is one JSON-ready dict (report.py writes it).
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, replace
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from coordinator.bench.batches import BatchRecorder
from coordinator.bench.ceiling import run_ceiling
from coordinator.bench.consume import run_consume
from coordinator.bench.context import BenchSettings, PhaseContext, Reporter
from coordinator.bench.cpu_cost import cpu_per_transaction
from coordinator.bench.java_peer import SHAPES, run_java_peer
from coordinator.bench.jit import compile_seconds, spent
from coordinator.bench.peer import run_peer
from coordinator.bench.pending import pending_config, run_pending
from coordinator.bench.resources import Processes, Sampler, Usage, cpu_between
from coordinator.bench.stats import ratio
from coordinator.bench.throughput import idle, run_path, wait_to_rest, warm_up
from coordinator.bench.visibility import commit_counts
from coordinator.core.config import Config, load_config
from coordinator.runtime.artifacts import jar_cache_dir
from coordinator.runtime.engine import Engine
from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from coordinator.runtime.local_stack.ports import free_port
from coordinator.runtime.spark_session import SparkSettings, build_spark_session
from streams.progress.listener import listen
from streams.query.decision_query import QUERY_NAME as COORDINATOR

SCHEMA = "txcoord-bench/1"


def _versions() -> dict[str, str]:
    found = {}
    for package in ("txcoord", "pyspark", "delta-spark", "kafka-python", "deltalake"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "?"
    return found


def machine() -> dict[str, Any]:
    """Return what the numbers depend on: cores, memory, load, versions."""
    memory = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                memory = int(line.split()[1]) * 1024
    return {
        "cpus": os.cpu_count(),
        "memory_bytes": memory,
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
        "versions": _versions(),
    }


def _settings_dict(settings: BenchSettings) -> dict[str, Any]:
    raw = asdict(settings)
    raw["state_dir"] = str(settings.state_dir) if settings.state_dir else None
    raw["paths"] = list(settings.paths)
    raw["pending"] = list(settings.pending)
    return raw


def _configuration(
    config: Config,
    forced: Mapping[str, str],
    config_file: Path | None,
    overrides: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    streams = config.streams
    return {
        "config_file": None if config_file is None else str(config_file),
        "overrides": dict(overrides or {}),  # --set, as given
        "transaction_timeout_s": config.transaction_timeout.total_seconds(),
        "transaction_check_interval_s": config.transaction_check_interval.total_seconds(),
        "transaction_check_max": config.transaction_check_max,
        "trigger_interval_s": streams.trigger_interval.total_seconds(),
        "tick_interval_s": streams.tick_interval.total_seconds(),
        "idle_tick_interval_s": streams.idle_tick_interval.total_seconds(),
        "resolved_retention_s": streams.resolved_retention.total_seconds(),
        "kafka_partitions": config.kafka.partitions,
        "shuffle_partitions": config.spark.shuffle_partitions,
        "set_by_bench": dict(forced),
    }


def _commits(config: Config, seconds: float) -> dict[str, Any]:
    return {
        "what": "Delta commits per table of the warehouse over the engine's life (warm-up, "
        "idle and both paths)",
        "engine_seconds": round(seconds, 1),
        "tables": commit_counts(config.warehouse),
    }


class Bench:
    """One run; `run()` returns the result."""

    def __init__(
        self,
        settings: BenchSettings,
        reporter: Reporter,
        *,
        config_file: Path | None = None,
        environ: Mapping[str, str] | None = None,
        overrides: Mapping[str, str] | None = None,
    ) -> None:
        self.settings, self.reporter = settings, reporter
        self.config_file, self.environ = config_file, environ or {}
        self.overrides = dict(overrides or {})
        self.stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.phases: dict[str, Any] = {}
        self._stack = contextlib.ExitStack()
        self._sampler: Sampler | None = None
        self._spark: Any = None  # the Spark session once started (its JVM's JIT is watched)

    # -- components -----------------------------------------------------------------------
    def _work_dir(self) -> Path:
        if self.settings.state_dir is not None:
            path = self.settings.state_dir.resolve() / f"run-{self.stamp}"
            path.mkdir(parents=True)
            return path
        path = Path(tempfile.mkdtemp(prefix="txcoord-bench-"))
        self._stack.callback(shutil.rmtree, path, True)
        return path

    def _broker(self, work_dir: Path) -> KafkaBroker:
        self.reporter.phase("starting kafka", None)
        broker = KafkaBroker(BrokerSettings(work_dir / "kafka"))
        broker.start()
        self._stack.callback(broker.stop)
        return broker

    def _config(self, work_dir: Path, bootstrap: str) -> tuple[Config, dict[str, str]]:
        forced = {
            "warehouse": str(work_dir / "warehouse"),
            "streams.checkpoint_dir": str(work_dir / "checkpoints"),
            "kafka.bootstrap_servers": bootstrap,
            "transaction_timeout": self.settings.transaction_timeout,
            "transaction_check_interval": self.settings.transaction_check_interval,
            "rest.host": "127.0.0.1",
            "rest.port": str(free_port()),
            "rest.auth_file": "",
            "grpc.host": "127.0.0.1",
            "grpc.port": str(free_port()),
            "metrics.port": "-1",
        }
        config = load_config(self.config_file, self.environ, {**self.overrides, **forced})
        return config, forced

    def _engine(self, spark: Any, config: Config, what: str) -> Engine:
        self.reporter.phase(f"starting {what}", None)
        engine = Engine(spark, config).start()
        self._stack.callback(engine.stop)
        return engine

    def _rest(self, config: Config) -> Any:
        # Imported here: FastAPI and uvicorn load only when the REST path runs.
        from coordinator.rest.app import build_server  # noqa: PLC0415

        self.reporter.phase("starting the REST ingress", None)
        server = build_server(config)
        thread = threading.Thread(target=server.run, name="bench-rest", daemon=True)
        thread.start()

        def stop() -> None:
            server.should_exit = True
            thread.join(15)

        self._stack.callback(stop)
        for _ in range(300):
            if server.started or not thread.is_alive():
                break
            thread.join(0.1)
        if not server.started:
            raise RuntimeError(f"the REST ingress did not start on port {config.rest.port}")
        return stop

    def _ingresses(self, config: Config) -> Callable[[], None]:
        """Start the REST ingress and the gRPC endpoint if the paths need them; return their
        stop (a stop runs once: the exit stack runs them too, whatever fails)."""
        stops = []
        if "rest" in self.settings.paths:
            stops.append(self._rest(config))
        if "grpc" in self.settings.paths:
            stops.append(self._grpc(config))

        def stop() -> None:
            for each in stops:
                each()

        return stop

    def _grpc(self, config: Config) -> Callable[[], None]:
        """Start the RocketMQ gRPC endpoint (open, on loopback); return its stop."""
        # Imported here: gRPC and RocketMQ's protocol load only when the gRPC path runs.
        from coordinator.rocketmq.server import Endpoint  # noqa: PLC0415

        self.reporter.phase("starting the RocketMQ gRPC endpoint", None)
        endpoint = Endpoint(config).start()
        stopped = threading.Event()

        def stop() -> None:
            if not stopped.is_set():
                stopped.set()
                endpoint.stop()

        self._stack.callback(stop)
        return stop

    @contextlib.contextmanager
    def _measure(self, name: str) -> Iterator[None]:
        assert self._sampler is not None
        before, started = self._sampler.sample(), time.monotonic()
        compiled = compile_seconds(self._spark) if self._spark is not None else None
        try:
            yield
        finally:
            seconds = time.monotonic() - started
            after: dict[str, Usage] = self._sampler.sample()
            now = compile_seconds(self._spark) if self._spark is not None else None
            self.phases[name] = {
                "seconds": round(seconds, 2),
                "processes": cpu_between(before, after, seconds),
                "jit_compile_seconds": spent(compiled, now),
            }

    # -- the run --------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Run every phase; return the result (raise if a phase fails)."""
        settings = self.settings
        started_at = datetime.now(UTC)
        result: dict[str, Any] = {
            "schema": SCHEMA,
            "started_at": started_at.isoformat(),
            "machine": machine(),
            "settings": _settings_dict(settings),
        }
        with self._stack:
            work_dir = self._work_dir()
            broker = self._broker(work_dir)
            config, forced = self._config(work_dir, broker.bootstrap_servers)
            result["configuration"] = _configuration(
                config, forced, self.config_file, self.overrides
            )
            self.reporter.phase("starting spark", None)
            spark = build_spark_session(
                SparkSettings(
                    app_name="txcoord-bench",
                    master=settings.master,
                    warehouse=config.warehouse,
                    driver_memory=settings.driver_memory,
                    shuffle_partitions=config.spark.shuffle_partitions,
                )
            )
            self._stack.callback(spark.stop)
            self._spark = spark
            self._sampler = Sampler(Processes(broker.info.pid)).start()
            self._stack.callback(self._sampler.stop)
            recorder = BatchRecorder()
            self._stack.callback(listen(spark, recorder))

            engine = self._engine(spark, config, "the engine")
            engine_started = time.monotonic()
            stop_ingresses = self._ingresses(config)
            context = PhaseContext(
                settings, config, engine, recorder, self.reporter, work_dir, self.stamp
            )
            result.update(self._throughput(context))
            result["consume"] = None
            if settings.consume:
                with self._measure("consume"):
                    result["consume"] = run_consume(context)
            stop_ingresses()
            engine.stop()
            result["delta_commits"] = _commits(config, time.monotonic() - engine_started)
            result["s3"] = self._on_s3(spark, config, context) if settings.s3 else None

            result["pending"] = None
            if settings.pending:
                pending = pending_config(config, work_dir)
                engine = self._engine(spark, pending, "the pending-state engine")
                with self._measure("pending"):
                    result["pending"], engine = run_pending(
                        replace(context, config=pending, engine=engine)
                    )
                engine.stop()
            result.update(self._references(spark, broker.bootstrap_servers, work_dir))
            result["resources"] = self._resources(result)
            if settings.state_dir is not None:
                result["state_dir"] = str(work_dir)
        finished_at = datetime.now(UTC)
        result["finished_at"] = finished_at.isoformat()
        result["wall_seconds"] = round((finished_at - started_at).total_seconds(), 1)
        result["machine"]["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
        result["ratios"] = ratios(result)
        result["cpu_per_transaction"] = cpu_per_transaction(result)
        result["notes"] = notes(result)
        return result

    def _throughput(self, context: PhaseContext) -> dict[str, Any]:
        """Warm the engine up, watch it idle, then drive each path."""
        settings = self.settings
        found: dict[str, Any] = {"warmup": None, "idle": None, "resting": None, "paths": {}}
        if settings.warmup:
            with self._measure("warm-up"):
                found["warmup"] = warm_up(context)
        if settings.idle_seconds:
            with self._measure("idle engine"):
                found["idle"] = idle(context, settings.idle_seconds)
        if settings.rest_seconds:
            waited = wait_to_rest(context)
            with self._measure("resting engine"):
                found["resting"] = idle(context, settings.rest_seconds, "resting engine")
            found["resting"]["waited_seconds"] = waited
        for path in settings.paths:
            with self._measure(f"{path} path"):
                found["paths"][path] = run_path(context, path)
        return found

    def _on_s3(self, spark: Any, config: Config, context: PhaseContext) -> dict[str, Any]:
        """Warm up and drive the Kafka path on an engine of its own whose warehouse and
        checkpoints are in a bucket of an S3 API on loopback; return its numbers."""
        # Imported here: moto is needed only by this phase (the `cluster` extra).
        from coordinator.runtime.local_stack.s3_server import S3Server  # noqa: PLC0415

        self.reporter.phase("starting the S3 API (moto)", None)
        server = S3Server(context.work_dir)
        self._stack.callback(server.stop)
        bucket = server.bucket("bench")
        saved = {name: os.environ.get(name) for name in server.environment()}
        os.environ.update(server.environment())  # delta-rs and Arrow read these
        self._stack.callback(_restore, saved)
        server.configure(spark)  # the session's s3a, already started, reads Hadoop's conf
        # What an s3a warehouse runs with outside the bench (coordinator/runtime/spark_session.py
        # sets the rename-based manager for local disks only): Spark's default.
        manager = "spark.sql.streaming.checkpointFileManagerClass"
        local_manager = spark.conf.get(manager, None)
        spark.conf.unset(manager)
        kafka = config.kafka
        on_s3 = replace(
            config,
            warehouse=f"s3a://{bucket}/warehouse",
            kafka=replace(
                kafka,
                half_topic=f"{kafka.half_topic}.s3",
                op_topic=f"{kafka.op_topic}.s3",
                check_topic=f"{kafka.check_topic}.s3",
            ),
            streams=replace(config.streams, checkpoint_dir=f"s3a://{bucket}/checkpoints"),
        )
        try:
            engine = self._engine(spark, on_s3, "the engine on S3")
            started = time.monotonic()
            on = replace(context, config=on_s3, engine=engine)
            found: dict[str, Any] = {"endpoint": server.endpoint, "warmup": None, "paths": {}}
            if self.settings.warmup:
                with self._measure("warm-up on S3"):
                    found["warmup"] = warm_up(on)
            with self._measure("kafka path on S3"):
                found["paths"]["kafka"] = run_path(on, "kafka")
            began, ended = found["paths"]["kafka"]["driven_between_s"]
            requests = server.requests_between(began, ended)
            batches = found["paths"]["kafka"]["where_time_went"][COORDINATOR]["batches"]
            found["requests"] = {
                "what": "requests the S3 API served while the kafka path was driven (the "
                "engine's: s3a for checkpoints and state, delta-rs for commits and reads)",
                "seconds": round(ended - began, 1),
                "by_method": requests,
                "coordinator_batches": batches,
                "per_batch": round(sum(requests.values()) / batches, 1) if batches else None,
            }
            engine.stop()
            found["delta_commits"] = _commits(on_s3, time.monotonic() - started)
        finally:
            if local_manager is not None:
                spark.conf.set(manager, local_manager)
        return found

    def _references(self, spark: Any, bootstrap: str, work_dir: Path) -> dict[str, Any]:
        """Measure the ceiling and the peers (with the engines stopped)."""
        settings = self.settings
        found: dict[str, Any] = {"ceiling": None, "peer": None, "java_peer": None}
        if settings.ceiling:
            self.reporter.phase("ceiling: raw Kafka -> Delta", None)
            with self._measure("ceiling"):
                found["ceiling"] = run_ceiling(
                    spark,
                    bootstrap,
                    f"bench.ceiling.{self.stamp}",
                    records=settings.ceiling_records,
                    repeats=settings.ceiling_repeats,
                    work_dir=work_dir / "ceiling",
                )
        if settings.peer:
            self.reporter.phase("peer: Kafka transactions", settings.peer_seconds)
            with self._measure("peer"):
                found["peer"] = run_peer(
                    bootstrap,
                    f"bench.peer.{self.stamp}",
                    self.stamp,
                    producers=settings.peer_producers,
                    seconds=settings.peer_seconds,
                    work_dir=work_dir,
                )
        if settings.java_peer:
            self.reporter.phase("java peer: ProducerPerformance, transactional", None)
            with self._measure("java peer"):
                found["java_peer"] = run_java_peer(
                    bootstrap,
                    self.stamp,
                    producers=settings.peer_producers,
                    records=settings.java_peer_records,
                    batch=settings.java_peer_batch,
                    work_dir=work_dir / "java-peer",
                    jar_cache=jar_cache_dir(self.environ),
                )
        return found

    def _resources(self, result: dict[str, Any]) -> dict[str, Any]:
        assert self._sampler is not None
        self._sampler.sample()
        peaks = dict(self._sampler.peak_rss)
        for path, numbers in (result.get("paths") or {}).items():
            peaks[f"load process ({path} path)"] = numbers["load_process"]["peak_rss_bytes"]
        if result.get("peer"):
            peaks["peer producers process"] = result["peer"]["load_peak_rss_bytes"]
        for shape, numbers in ((result.get("java_peer") or {}).get("shapes") or {}).items():
            peaks[f"java peer JVM ({shape}, largest)"] = numbers["peak_rss_bytes"]
        return {"phases": self.phases, "peak_rss_bytes": peaks}


def _restore(saved: Mapping[str, str | None]) -> None:
    """Put environment variables back as they were (None: absent)."""
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def ratios(result: dict[str, Any]) -> dict[str, Any]:
    """Return, per path: our sustained tx/s over each peer's and over the ceiling's.

    For the Java peer also our rate over its records/s (`..._records`): a transaction of
    ours carries one message, one of its carries `records_per_tx`.
    """
    peer = (result.get("peer") or {}).get("tx_per_s")
    ceiling = (result.get("ceiling") or {}).get("tx_per_s_equivalent")
    shapes = ((result.get("java_peer") or {}).get("shapes")) or {}
    found = {}
    for path, numbers in (result.get("paths") or {}).items():
        ours = numbers["sustained_tx_per_s"]
        found[path] = {
            "sustained_tx_per_s": ours,
            "ours_over_peer": ratio(ours, peer),
            "ours_over_ceiling": ratio(ours, ceiling),
        }
        for shape in SHAPES:
            java = shapes.get(shape) or {}
            found[path][f"ours_over_java_{shape}"] = ratio(ours, java.get("tx_per_s"))
            found[path][f"ours_over_java_{shape}_records"] = ratio(ours, java.get("records_per_s"))
    return found


def _settings_source(configuration: Mapping[str, Any]) -> str:
    """Say where the engine's settings came from: the defaults, a --config file, --set."""
    file = configuration.get("config_file")
    overrides = configuration.get("overrides") or {}
    given = " ".join(f"--set {key}={value}" for key, value in sorted(overrides.items()))
    if file and given:
        return f"as {file} and {given} set it (defaults for the rest)"
    if file or given:
        return f"as {file or given} sets it (defaults for what it does not)"
    return "the default"


GRPC_NOTE = (
    "grpc path: RocketMQ's own Java client (rocketmq-client-java, Maven Central; "
    "deploy/jvm/rocketmq-peer/txcoord/peer/RocketMqBench.java) in one JVM, a transactional "
    "Producer with its TransactionChecker, against the gRPC endpoint running in the bench "
    "process (open mode, loopback). Each of its `grpc_senders` threads runs one transaction at "
    "a time (beginTransaction, send, then commit() or rollback(), or neither for the checked "
    "kinds), "
    "as the client sends transactional messages synchronously; the same mix, window and rate "
    "as the other paths. Its JVM's CPU counts among the load processes; the endpoint's is the "
    "bench process's. client_latency_ms: the client's own send and commit/rollback calls."
)


def notes(result: dict[str, Any]) -> list[str]:
    """Return what a reader must know to read the numbers honestly."""
    configuration = result.get("configuration") or {}
    machine_info = result["machine"]
    found = [
        f"One machine, {machine_info['cpus']} cores, shared by every process of the run: the "
        "broker, Spark, the coordinator driver + REST ingress, and the load processes. Load "
        f"average {machine_info['load_average_at_start']} at start and "
        f"{machine_info.get('load_average_at_end')} at end (other work on the machine counts).",
        "A warm-up runs the mix through the fresh engine before anything is measured: at "
        "least `warmup` transactions, then on at full speed until the Spark JVM's JIT "
        "compilers have settled (under 15% of the last 30 s compiling; a fresh JVM compiles "
        "for a minute or two under load) or `warmup_max_seconds` have passed; each phase "
        "reports the seconds the compilers spent during it (jit_compile_seconds); 'idle "
        "engine' is the engine with no load at all while its ticker still ticks every "
        "second (the floor cost of a batch); 'resting engine' is the same once no timer is "
        "near and the ticker has slowed to `streams.idle_tick_interval` (what an "
        "idle stack costs).",
        f"transaction_timeout is {configuration.get('transaction_timeout_s')} s and "
        f"transaction_check_interval {configuration.get('transaction_check_interval_s')} s "
        "(set by the bench so checked and rechecked transactions finish quickly; the defaults "
        "are 6 s and 30 s); every other "
        f"engine setting is {_settings_source(configuration)}: trigger "
        f"{configuration.get('trigger_interval_s')} s, tick "
        f"{configuration.get('tick_interval_s')} s, idle tick "
        f"{configuration.get('idle_tick_interval_s')} s, "
        f"{configuration.get('kafka_partitions')} Kafka partitions per ingress topic, "
        f"{configuration.get('shuffle_partitions')} shuffle partitions.",
        "sustained_tx_per_s: transactions reaching a final state per second between 10% and "
        "90% of the phase's transactions being decided; the load keeps at most `window` "
        "transactions undecided (closed loop) unless --rate is given. If the run was too "
        "short for a steady state, it falls back to 90% of the transactions over the time "
        "from the first send (`sustained_method` says which).",
        "commit_to_visible_ms: from the COMMIT op's acknowledgement (Kafka ack callback, the "
        "REST 202, or the return of the Java client's commit()) to the modification time of "
        "the Delta commit file that added the row to topics/<topic>; checked commits start "
        "at the COMMIT answer's acknowledgement (grpc: when the client's TransactionChecker "
        "returned COMMIT; the client sends the EndTransaction after, untimed).",
        "check_timeliness_ms: first check requested_at - prepared_at - transaction_timeout. "
        "A check is due transaction_timeout after the half was stored and goes out once the "
        "coordinator has seen everything stored up to then (its store-time lag: about two "
        "coordinator batches plus a tick and store_time_skew; contract 7.4 allows 2 x timeout + "
        "a few s). later_check_timeliness_ms: check n >= 2 requested_at (or received by the "
        "producer) - requested_at of check n-1 - transaction_check_interval (the rechecked kind "
        "answers UNKNOWN to its first check).",
        "Ceiling: raw Kafka -> Delta append, no parsing, join or state; a transaction costs at "
        "least 2 ingress records, so tx_per_s_equivalent = records/s / 2.",
        "CPU: seconds used by each group of processes during each phase (/proc); 'other "
        "processes (not this run)' is the rest of the machine's busy time, i.e. how much "
        "the run was competing with. Peak RSS: VmHWM of each JVM and of this process, the "
        "sampled (1 s) peak of the summed RSS of the Python workers and load processes.",
        "CPU per transaction: the CPU every process of the run used during a path's phase "
        "(the machine's other work not counted) over the transactions the phase decided. "
        "'in Java peer records': the same CPU as a count of the Java peer's records (short "
        "shape: its CPU per record, same run), a unit that moves with the host, not with the "
        "engine: compare engines across hosts with it, not with milliseconds.",
        "Peer: Kafka transactions give atomic multi-partition writes and read_committed "
        "visibility, but no check-back of unknown outcomes, no dense per-queue offsets and no "
        "queryable table; the ratio compares throughput only.",
        "Java peer: Kafka's own ProducerPerformance (Java client, default producer settings, "
        "unthrottled), `peer_producers` JVMs side by side, one topic of one partition each; "
        "tx/s and records/s are their sums. The tool commits on the first send at least "
        "--transaction-duration-ms (> 0) after beginTransaction, so it cannot make one-record "
        "transactions: 'short' (1 ms) is the closest it gets, 'batch' aims at "
        "`java_peer_batch` records; records_per_tx is measured (commit markers: log end offset "
        "- records). Its latency is per record, send() to acknowledgement (in the log, not "
        "yet readable by read_committed consumers), as it prints it: mean and max over all "
        "producers, p50...p99.9 the median of the producers' figures. ours_over_java_<shape> "
        "divides tx/s; ..._records divides our tx/s (one message each) by its records/s.",
    ]
    if "grpc" in ((result.get("settings") or {}).get("paths") or ()):
        found.append(GRPC_NOTE)
    return found
