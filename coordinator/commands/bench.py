"""`txcoord bench`: the benchmark of contract 8 (coordinator/bench/)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from coordinator.bench.context import PATHS, BenchSettings
from coordinator.bench.report import write
from coordinator.bench.runner import Bench
from coordinator.bench.workload import DEFAULT_MIX, Mix
from coordinator.core.config import parse_overrides

#: Without a terminal, progress is printed this often instead of redrawn.
PLAIN_EVERY_SECONDS = 10.0


class ConsoleReporter:
    """A rich progress bar on a terminal; a plain line now and then elsewhere."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,.0f} decided"),
            TimeElapsedColumn(),
            console=console,
            disable=not console.is_terminal,
        )
        self.task: Any = None
        self._printed = 0.0

    def __enter__(self) -> ConsoleReporter:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def phase(self, name: str, total: float | None) -> None:
        """Start a new bar for the phase."""
        if self.task is not None:  # the previous phase is complete, whatever its total was
            done = self.progress.tasks[-1].completed or 1
            self.progress.update(self.task, completed=done, total=done)
        self.task = self.progress.add_task(name, total=total)
        if not self.console.is_terminal:
            self.console.print(f"{time.strftime('%H:%M:%S')} {name}", highlight=False)
            self._printed = time.monotonic()

    def update(self, completed: float, detail: str) -> None:
        """Advance the current bar."""
        if self.task is not None:
            self.progress.update(self.task, completed=completed, description=detail)
        if not self.console.is_terminal and time.monotonic() - self._printed > PLAIN_EVERY_SECONDS:
            self.console.print(f"{time.strftime('%H:%M:%S')} {detail}", highlight=False)
            self._printed = time.monotonic()

    def note(self, text: str) -> None:
        """Print a line above the bar."""
        self.console.print(text, highlight=False)


def _levels(text: str) -> tuple[int, ...]:
    if text.strip().lower() in ("", "none"):
        return ()
    try:
        return tuple(int(float(part)) for part in text.split(",") if part.strip())
    except ValueError:
        raise click.BadParameter(f"expected numbers such as 1e4,1e5, not {text!r}") from None


def _paths(given: tuple[str, ...]) -> tuple[str, ...]:
    """Return the paths `--path` names, in the order given (both, all: their paths)."""
    named = {"both": ("kafka", "rest"), "all": PATHS}
    found = [path for each in given for path in named.get(each, (each,))]
    return tuple(dict.fromkeys(found))


def _summary(result: dict[str, Any], console: Console) -> None:
    table = Table(title="txcoord bench (medians where repeated; see the markdown for more)")
    for column in (
        "path",
        "decided as expected",
        "sustained tx/s",
        "commit→visible ms p50/p95/p99",
        "first check delay ms p50/p95",
        "÷ peer",
        "÷ java short",
        "÷ java batch",
        "÷ ceiling",
    ):
        table.add_column(column)
    for path, p in (result.get("paths") or {}).items():
        t, lat, r = p["transactions"], p["commit_to_visible_ms"], result["ratios"][path]
        checks = p["check_timeliness_ms"]["recorded"]
        table.add_row(
            path,
            f"{t['as_expected']:,}/{t['sent']:,}",
            str(p["sustained_tx_per_s"]),
            f"{lat['p50']}/{lat['p95']}/{lat['p99']}",
            f"{checks['p50']}/{checks['p95']}",
            str(r["ours_over_peer"]),
            str(r["ours_over_java_short"]),
            str(r["ours_over_java_batch"]),
            str(r["ours_over_ceiling"]),
        )
    console.print(table)
    if result.get("peer"):
        peer = result["peer"]
        console.print(
            f"peer: {peer['tx_per_s']} tx/s ({peer['what']}); visible p50 "
            f"{peer['visible_latency_ms']['p50']} ms",
            highlight=False,
        )
    for shape, numbers in ((result.get("java_peer") or {}).get("shapes") or {}).items():
        latency = numbers["latency_ms"]
        console.print(
            f"java peer, {shape} (--transaction-duration-ms {numbers['transaction_duration_ms']}"
            f", {numbers['records_per_tx']} records/tx): {numbers['tx_per_s']} tx/s, "
            f"{numbers['records_per_s']} records/s; send→ack avg {latency['avg']} ms, p50 "
            f"{latency['p50']}, p99 {latency['p99']}, max {latency['max']} ms",
            highlight=False,
        )
    if result.get("ceiling"):
        ceiling = result["ceiling"]
        console.print(
            f"ceiling: {ceiling['rows_per_s_median']} records/s raw Kafka→Delta "
            f"(≈ {ceiling['tx_per_s_equivalent']} tx/s at 2 records per transaction)",
            highlight=False,
        )
    for level in (result.get("pending") or {}).get("levels", []):
        batch = level["coordinator_batch_ms"]
        rebuilt = level.get("rebuild")
        console.print(
            f"pending {level['pending']:,}: coordinator batch p50 {batch['p50']} ms, "
            f"p95 {batch['p95']} ms, state rows {level['state_rows_median']}"
            + (
                f"; state rebuild {rebuilt['checkpoint']['seconds']} s from the checkpoint, "
                f"{rebuilt['warehouse']['seconds']} s from the warehouse "
                f"({rebuilt['checkpoint']['transactions']:,} transactions)"
                if rebuilt
                else ""
            ),
            highlight=False,
        )


@click.command()
@click.option(
    "--duration",
    type=click.FloatRange(min=1),
    help="Seconds of load per path (default 30 unless --count is given).",
)
@click.option("--count", type=click.IntRange(min=1), help="Transactions per path instead.")
@click.option(
    "--rate",
    type=click.FloatRange(min=0.1),
    help="Target tx/s (default: as fast as the in-flight window allows).",
)
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Most transactions sent and not yet decided.",
)
@click.option(
    "--batch",
    type=click.IntRange(1, 1000),
    default=500,
    show_default=True,
    help="Transactions per Kafka flush or REST batch request.",
)
@click.option(
    "--path",
    "path",
    type=click.Choice([*PATHS, "both", "all"]),
    multiple=True,
    default=("both",),
    show_default=True,
    help="Ingress path to drive, repeatable: kafka, rest, grpc (RocketMQ's Java client on the "
    "gRPC endpoint); both: kafka and rest; all: the three.",
)
@click.option(
    "--grpc-senders",
    type=click.IntRange(1, 1024),
    default=32,
    show_default=True,
    help="Threads of the gRPC path's Java client, each one transaction at a time (the "
    "client sends transactional messages synchronously).",
)
@click.option("--mix", default=DEFAULT_MIX, show_default=True, help="Kinds and weights.")
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    default=200,
    show_default=True,
    help="Transactions through the fresh engine before measuring (0: no warm-up).",
)
@click.option(
    "--warmup-max-seconds",
    type=click.FloatRange(min=0),
    default=240,
    show_default=True,
    help="After --warmup transactions the warm-up goes on at full speed until the Spark "
    "JVM's JIT compilers have settled (under 15%% of the last 30 s spent compiling), at most "
    "this long (0: stop after --warmup transactions).",
)
@click.option(
    "--idle-seconds",
    type=click.FloatRange(min=0),
    default=10,
    show_default=True,
    help="Seconds the idle engine is watched while its ticker still ticks (0: skip).",
)
@click.option(
    "--rest-seconds",
    type=click.FloatRange(min=0),
    default=60,
    show_default=True,
    help="Seconds the idle engine is watched once its ticker rests, after waiting for that "
    "(the check interval and a few seconds; 0: skip).",
)
@click.option(
    "--pending",
    "pending",
    default="0,1e4",
    show_default=True,
    help="Unresolved-state levels, e.g. 0,1e4,1e5,1e6 (0 is a baseline; 10^6 takes long); "
    "'none' skips.",
)
@click.option(
    "--pending-window",
    type=click.FloatRange(min=1),
    default=15,
    show_default=True,
    help="Seconds of steady load measured per pending level.",
)
@click.option(
    "--pending-rate",
    type=click.FloatRange(min=1),
    default=50,
    show_default=True,
    help="tx/s of that steady load.",
)
@click.option(
    "--rebuild/--no-rebuild",
    default=True,
    show_default=True,
    help="Time `txcoord state rebuild` (from the checkpoint and from the warehouse) at each "
    "pending level but 0.",
)
@click.option("--skip-peer", is_flag=True, help="Do not measure Kafka's transactional producer.")
@click.option("--peer-seconds", type=click.FloatRange(min=1), default=15, show_default=True)
@click.option(
    "--peer-producers",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="Transactional producers side by side, for each peer.",
)
@click.option(
    "--skip-java-peer",
    is_flag=True,
    help="Do not measure Kafka's ProducerPerformance (Java client, transactional).",
)
@click.option(
    "--java-peer-records",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Records per ProducerPerformance producer in its short shape (1 ms transactions).",
)
@click.option(
    "--java-peer-batch",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Records per transaction its batch shape aims at.",
)
@click.option("--skip-ceiling", is_flag=True, help="Do not measure the raw Kafka→Delta append.")
@click.option(
    "--s3",
    is_flag=True,
    help="Also drive the Kafka path on an engine whose warehouse and checkpoints are on an "
    "S3 API on loopback (moto's server), beside the local one.",
)
@click.option(
    "--skip-consume",
    is_flag=True,
    help="Do not measure commit→consumed (a light commit load read by an SDK consumer).",
)
@click.option(
    "--consume-seconds",
    type=click.FloatRange(min=1),
    default=20.0,
    show_default=True,
    help="Seconds of the commit→consumed phase's load (50 tx/s).",
)
@click.option("--ceiling-records", type=click.IntRange(min=1), default=100_000, show_default=True)
@click.option("--ceiling-repeats", type=click.IntRange(1, 20), default=3, show_default=True)
@click.option(
    "--transaction-timeout",
    default="2s",
    show_default=True,
    help="The engine's transaction_timeout for the run (default 6s is RocketMQ's).",
)
@click.option(
    "--check-interval",
    default="5s",
    show_default=True,
    help="The engine's transaction_check_interval for the run: how long after a check an "
    "undecided transaction is checked again (the engine's default is 30s); the mix's "
    "rechecked-commit transactions wait for it.",
)
@click.option(
    "--drain-timeout",
    type=click.FloatRange(min=1),
    default=180,
    show_default=True,
    help="Longest wait for the last decisions after sending.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results"),
    show_default=True,
    help="Where results go (a folder of the working directory by default; a checkout's "
    "committed results: --out bench/results, see bench/README.md).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Keep the run's broker, warehouse and checkpoints here (default: a "
    "temporary folder, removed).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="TOML configuration of the engine (the bench sets its own warehouse, "
    "broker, ports, transaction_timeout and transaction_check_interval).",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override one configuration key (repeatable).",
)
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option("--driver-memory", default="4g", show_default=True, help="Spark driver heap.")
@click.pass_context
def bench(
    ctx: click.Context,
    *,
    duration: float | None,
    count: int | None,
    rate: float | None,
    window: int,
    batch: int,
    path: tuple[str, ...],
    grpc_senders: int,
    mix: str,
    warmup: int,
    warmup_max_seconds: float,
    idle_seconds: float,
    rest_seconds: float,
    pending: str,
    pending_window: float,
    pending_rate: float,
    rebuild: bool,
    skip_peer: bool,
    peer_seconds: float,
    peer_producers: int,
    skip_java_peer: bool,
    java_peer_records: int,
    java_peer_batch: int,
    skip_ceiling: bool,
    s3: bool,
    skip_consume: bool,
    consume_seconds: float,
    ceiling_records: int,
    ceiling_repeats: int,
    transaction_timeout: str,
    check_interval: str,
    drain_timeout: float,
    out: Path,
    state_dir: Path | None,
    config_file: Path | None,
    overrides: tuple[str, ...],
    master: str,
    driver_memory: str,
) -> None:
    """Measure txcoord end to end on this machine, with Kafka's transactions as the peer.

    Starts its own broker, Spark, engine, REST ingress and gRPC endpoint (as the paths need);
    drives transactions of the mix through the Kafka ingress, the REST ingress and/or
    RocketMQ's Java client on the gRPC endpoint; waits for every decision; then measures
    batch time against unresolved state, the raw Kafka→Delta append rate (the ceiling), and
    two peers: kafka-python's transactional producer, and Kafka's own ProducerPerformance
    (Java client) with short and batched transactions. Writes JSON, markdown and PNG to --out.
    """
    try:
        Mix.parse(mix)
        settings = BenchSettings(
            paths=_paths(path),
            duration=duration if duration is not None else (None if count else 30.0),
            count=count,
            rate=rate,
            window=window,
            batch=batch,
            grpc_senders=grpc_senders,
            mix=mix,
            warmup=warmup,
            warmup_max_seconds=warmup_max_seconds,
            idle_seconds=idle_seconds,
            rest_seconds=rest_seconds,
            pending=_levels(pending),
            pending_window=pending_window,
            pending_rate=pending_rate,
            rebuild=rebuild,
            peer=not skip_peer,
            peer_seconds=peer_seconds,
            peer_producers=peer_producers,
            java_peer=not skip_java_peer,
            java_peer_records=java_peer_records,
            java_peer_batch=java_peer_batch,
            ceiling=not skip_ceiling,
            s3=s3,
            consume=not skip_consume,
            consume_seconds=consume_seconds,
            ceiling_records=ceiling_records,
            ceiling_repeats=ceiling_repeats,
            transaction_timeout=transaction_timeout,
            transaction_check_interval=check_interval,
            drain_timeout=drain_timeout,
            master=master,
            driver_memory=driver_memory,
            state_dir=state_dir,
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from exc
    verbose = bool(ctx.parent and ctx.parent.params.get("verbose"))
    if not verbose:  # per-batch progress lines would drown the bar; warnings still show
        for handler in logging.getLogger().handlers:
            handler.setLevel(logging.WARNING)
    console = Console()
    with ConsoleReporter(console) as reporter:
        result = Bench(
            settings,
            reporter,
            config_file=config_file,
            environ=os.environ,
            overrides=parse_overrides(list(overrides)),
        ).run()
    written = write(result, out)
    _summary(result, console)
    for kind, file in written.items():
        console.print(f"{kind}: {file}", highlight=False)
