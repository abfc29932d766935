"""`txcoord up`: the whole local stack in the foreground, with a live status line."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import click
from rich.console import Console
from rich.live import Live
from rich.text import Text

from coordinator.core.config import Config, load_config, parse_overrides
from coordinator.core.errors import StackError
from coordinator.runtime.local_stack.broker_auth import load_broker_auth
from coordinator.runtime.local_stack.cluster_profile import (
    START_BOUND,
    ClusterProfile,
    ProfileSettings,
)
from coordinator.runtime.local_stack.stack import (
    GrpcEndpoint,
    LocalStack,
    RestServer,
    StackSettings,
)
from coordinator.stop_signals import StopSignals

#: Without a terminal (CI, a log file) the status is logged this often instead of redrawn.
PLAIN_STATUS_EVERY_SECONDS = 30.0


def _rest_server(config: Config) -> RestServer:
    """Build the REST ingress's server (handed to the local stack, which is below REST)."""
    # Imported here: FastAPI and uvicorn load only when the REST ingress runs.
    from coordinator.rest.app import build_server  # noqa: PLC0415

    return build_server(config)


def _grpc_endpoint(config: Config) -> GrpcEndpoint:
    """Build the RocketMQ gRPC endpoint (handed to the local stack, which is below it)."""
    # Imported here: gRPC loads only when the endpoint runs.
    from coordinator.rocketmq.server import Endpoint  # noqa: PLC0415

    return Endpoint(config)


def _status(stack: LocalStack, started: float) -> Text:
    uptime = time.strftime("%H:%M:%S", time.gmtime(time.monotonic() - started))
    status = stack.status()
    c = status.counts
    line = Text()
    line.append("● ", style="green")
    line.append(f"kafka {stack.broker.bootstrap_servers}  ")
    if status.rest_url:
        line.append("● ", style="green")
        line.append(f"rest {status.rest_url}  ")
    line.append(f"pending {c.pending}  checking {c.checking}  ", style="yellow")
    line.append(f"committed {c.committed}  ", style="green")
    line.append(f"rolled back {c.rolled_back}  discarded {c.discarded}  ")
    line.append(f"checks sent {c.checks_sent}  input lag {status.input_lag}  ")
    line.append(f"up {uptime}  ", style="dim")
    line.append("Ctrl-C to stop", style="dim")
    return line


def _watch(stack: LocalStack, console: Console, stop: threading.Event) -> None:
    """Show the status until `stop` is set; raise StackError if a component dies."""
    started = time.monotonic()
    if console.is_terminal:
        with Live(_status(stack, started), console=console, refresh_per_second=2) as live:
            while not (problems := stack.problems()):
                if stop.wait(0.5):
                    return
                live.update(_status(stack, started))
    else:
        last = 0.0
        while not (problems := stack.problems()):
            if time.monotonic() - last >= PLAIN_STATUS_EVERY_SECONDS:
                console.print(_status(stack, started), soft_wrap=True)
                last = time.monotonic()
            if stop.wait(0.5):
                return
    raise StackError("; ".join(problems))


def _up_cluster(
    console: Console, config_file: Path | None, overrides: dict[str, str], settings: ProfileSettings
) -> None:
    """Run the cluster profile until Ctrl-C or until one of its parts exits."""
    signals = StopSignals(interrupting=True).install()
    profile = ClusterProfile(settings, config_file, overrides)
    try:
        for line in profile.start():
            console.print(line, highlight=False)
        console.print(
            f"txcoord cluster is up: REST at {profile.rest_url}, warehouse "
            f"{profile.config.warehouse if profile.config else ''}, logs in {profile.logs}. "
            "Press Ctrl-C to stop.",
            highlight=False,
        )
        sys.stdout.flush()
        signals.interrupting = False
        while not signals.requested.wait(1.0):
            if problems := profile.problems():
                raise StackError("; ".join(problems))
        console.print("stopping...", highlight=False)
    except KeyboardInterrupt:
        console.print("stopping...", highlight=False)
    finally:
        signals.interrupting = False
        profile.stop()
    console.print("stopped cleanly", highlight=False)


@click.command()
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="TOML configuration file (see deploy/txcoord.example.toml).",
)
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override one configuration key, e.g. --set transaction_timeout=10s (repeatable).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("var"),
    show_default=True,
    help="Broker storage, stream checkpoints and logs. Reused on restart.",
)
@click.option(
    "--warehouse",
    type=click.Path(file_okay=False, path_type=Path),
    help="Root folder of every Delta table (default: the configuration's, ./warehouse).",
)
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    help="REST ingress port on 127.0.0.1 (default: the configuration's, 8080).",
)
@click.option(
    "--auth-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Auth file: REST tokens ([[token]]) and, with a [kafka] part, the broker's SASL "
    "principals and ACLs; without one everything runs open, on 127.0.0.1 only.",
)
@click.option("--no-rest", is_flag=True, help="Run without the REST ingress.")
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option(
    "--kafka-port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Broker port on 127.0.0.1; 0 reuses the last one, or picks a free one.",
)
@click.option("--driver-memory", default="4g", show_default=True, help="Spark driver heap.")
@click.option(
    "--cluster",
    is_flag=True,
    help="Run the production shape instead, every part a process on 127.0.0.1: an S3 API "
    "(moto, in memory) holding warehouse and checkpoints, three Kafka brokers, a Spark "
    "master with two workers, the coordinator submitted to it, the REST ingress. Starts "
    "fresh each time (docs/deployment.md).",
)
@click.option(
    "--start-timeout",
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="With --cluster: how long the coordinator may take to start on the cluster before "
    f"up gives up [default: {START_BOUND:.0f}; ~60 s on a loaded 2-core machine].",
)
def up(
    *,
    config_file: Path | None,
    overrides: tuple[str, ...],
    state_dir: Path,
    warehouse: Path | None,
    port: int | None,
    auth_file: Path | None,
    no_rest: bool,
    master: str,
    kafka_port: int,
    driver_memory: str,
    cluster: bool,
    start_timeout: float | None,
) -> None:
    """Run the whole local stack in the foreground until Ctrl-C.

    Starts a single-node Kafka broker (KRaft, 127.0.0.1) from the install step's jars, a
    local Spark session with Delta Lake, the decision query, and the REST
    ingress; checks each with a real round trip, then shows a live status line. Ctrl-C (or
    SIGTERM) stops everything in order; running it again continues where it stopped (same
    broker storage, checkpoints and warehouse).
    """
    console = Console(soft_wrap=True)
    state_dir = state_dir.resolve()  # relative: to the working directory (contract 4)
    if cluster:
        chosen_elsewhere = {
            "--warehouse": warehouse is not None,
            "--auth-file": auth_file is not None,
            "--no-rest": no_rest,
            "--master": master != "local[2]",
            "--kafka-port": kafka_port != 0,
        }
        if clash := [name for name, given in chosen_elsewhere.items() if given]:
            raise click.UsageError(f"--cluster chooses these itself: {', '.join(clash)}")
        rest = {"rest.port": str(port)} if port is not None else {}
        profile = ProfileSettings(
            state_dir / "cluster",
            driver_memory=driver_memory,
            start_bound=start_timeout or START_BOUND,
        )
        _up_cluster(console, config_file, {**rest, **parse_overrides(list(overrides))}, profile)
        return
    if start_timeout is not None:
        raise click.UsageError("--start-timeout is for --cluster (the coordinator's start there)")
    # Ctrl-C or SIGTERM: abandon a start; once up, one orderly stop (coordinator/stop_signals.py).
    signals = StopSignals(interrupting=True).install()
    chosen = {"streams.checkpoint_dir": str(state_dir / "checkpoints")}
    if warehouse is not None:
        chosen["warehouse"] = str(warehouse)
    if port is not None:
        chosen["rest.port"] = str(port)
    if auth_file is not None:
        chosen["rest.auth_file"] = str(auth_file)
    config = load_config(config_file, os.environ, {**chosen, **parse_overrides(list(overrides))})
    stack = LocalStack(
        StackSettings(
            state_dir=state_dir,
            master=master,
            kafka_port=kafka_port,
            driver_memory=driver_memory,
            broker_auth=load_broker_auth(auth_file) if auth_file is not None else None,
        ),
        config,
        rest_server=None if no_rest else _rest_server,
        grpc_endpoint=_grpc_endpoint if config.grpc.enabled else None,
    )
    try:
        for health in stack.start():
            console.print(str(health), highlight=False)
        console.print(
            f"txcoord is up: kafka at {stack.broker.bootstrap_servers}, "
            f"warehouse {Path(stack.config.warehouse).resolve()}"
            + (f", REST at {stack.rest_url}" if stack.rest_url else "")
            + (f", RocketMQ gRPC at {stack.grpc_address}" if stack.grpc_address else "")
            + ". Press Ctrl-C to stop.",
            highlight=False,
        )
        sys.stdout.flush()
        signals.interrupting = False
        if not signals.requested.is_set():
            _watch(stack, console, signals.requested)
        console.print("stopping...", highlight=False)
    except KeyboardInterrupt:
        console.print("stopping...", highlight=False)
    finally:
        signals.interrupting = False  # a signal during the stop asks it to hurry instead
        stack.stop(signals.hurry)
    console.print("stopped cleanly", highlight=False)
