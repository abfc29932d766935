"""`txcoord broker start|stop|status`: the local KRaft broker on its own, in the background."""

from __future__ import annotations

from pathlib import Path

import click

from coordinator.runtime.local_stack.kafka_broker import (
    BrokerSettings,
    KafkaBroker,
    pid_is_our_broker,
    read_info,
    stop_by_pid_file,
)

_data_dir = click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("var/kafka"),
    show_default=True,
    help="Broker configuration, storage and logs.",
)


@click.group()
def broker() -> None:
    """Run the local Kafka broker (KRaft, 127.0.0.1) on its own."""


@broker.command()
@_data_dir
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Client port; 0 reuses the last one or picks a free one.",
)
@click.option("--heap", default="1g", show_default=True, help="Broker JVM heap.")
def start(data_dir: Path, port: int, heap: str) -> None:
    """Start the broker in the background and wait until it serves metadata."""
    running = KafkaBroker(
        BrokerSettings(data_dir=data_dir, port=port, heap=heap, die_with_parent=False)
    ).start()
    click.echo(f"kafka broker ready at {running.bootstrap_servers} (pid {running.info.pid})")
    click.echo(f"logs: {running.log_dir}")


@broker.command()
@_data_dir
@click.option(
    "--timeout",
    type=float,
    default=30.0,
    show_default=True,
    help="Seconds to wait after SIGTERM before SIGKILL.",
)
def stop(data_dir: Path, timeout: float) -> None:
    """Stop the broker started with `txcoord broker start`."""
    if stop_by_pid_file(data_dir, timeout):
        click.echo("kafka broker stopped")
    else:
        click.echo(f"no broker is running on {data_dir}")


@broker.command()
@_data_dir
def status(data_dir: Path) -> None:
    """Say whether a broker runs on the data folder, and where."""
    info = read_info(data_dir.resolve())
    if info and info.pid and pid_is_our_broker(info.pid, data_dir.resolve()):
        click.echo(f"running at {info.bootstrap_servers} (pid {info.pid})")
    else:
        raise click.ClickException(f"no broker is running on {data_dir}")
