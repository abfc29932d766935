"""`txcoord state rebuild`: move the coordinator's state to a new checkpoint.

The work is streams/state/rebuild.py's; this is its command line:

    txcoord state rebuild --partitions 8                  # the local stack (var/), stopped
    txcoord state rebuild --config prod.toml --cluster --master spark://host:7077

With the local stack (`txcoord up`, stopped first) it starts the stack's broker from
`--state-dir` for the time of the rebuild; with `--cluster` it uses the configuration's
Kafka and checkpoint folder, and the coordinator application must be stopped.
"""

from __future__ import annotations

import os
from pathlib import Path

import click
from rich.console import Console

from coordinator.commands.options import configuration_options
from coordinator.core import failpoints
from coordinator.core.config import load_config, parse_overrides
from coordinator.runtime.local_stack.broker_auth import load_broker_auth
from coordinator.runtime.local_stack.stack import LocalStack, StackSettings
from coordinator.runtime.spark_session import SparkSettings, build_spark_session
from streams.state.rebuild import SOURCES, rebuild


@click.group()
def state() -> None:
    """Move the coordinator's state: rescale it, rebuild it, upgrade it."""


@state.command("rebuild")
@configuration_options("its Kafka, warehouse, checkpoint folder and spark.shuffle_partitions")
@click.option(
    "--partitions",
    type=click.IntRange(1, 10_000),
    help="How many partitions the new state is split into (default: spark.shuffle_partitions "
    "of the configuration, which must then say the same for the coordinator to start).",
)
@click.option(
    "--from",
    "source",
    type=click.Choice(SOURCES),
    default="checkpoint",
    show_default=True,
    help="Read the state from the checkpoint in use, or derive it from the warehouse "
    "(when the checkpoint is lost or of an older layout).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("var"),
    show_default=True,
    help="The local stack's folder (as `txcoord up --state-dir`): its broker is started for "
    "the rebuild and its checkpoints are rebuilt.",
)
@click.option(
    "--auth-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="The local stack's auth file, when it runs with one (`txcoord up --auth-file`).",
)
@click.option(
    "--cluster",
    is_flag=True,
    help="Use the configuration's Kafka and checkpoint folder instead of the local stack.",
)
@click.option("--master", default="local[2]", show_default=True, help="Spark master URL.")
@click.option("--driver-memory", default="4g", show_default=True, help="Spark driver heap.")
# Crash tests only (coordinator/core/failpoints.py): freeze at the N-th pass of a failpoint.
@click.option("--failpoint", "armed", multiple=True, hidden=True)
def rebuild_command(
    *,
    config_file: Path | None,
    overrides: tuple[str, ...],
    partitions: int | None,
    source: str,
    state_dir: Path,
    auth_file: Path | None,
    cluster: bool,
    master: str,
    driver_memory: str,
    armed: tuple[str, ...],
) -> None:
    """Build a new checkpoint with the state moved, and switch to it atomically.

    The coordinator must be stopped. Every live transaction keeps its check count and next
    check, every decided one keeps judging late ops; Kafka is read on from where the old
    checkpoint stopped, so every record is decided once. Killed at any moment, the old
    checkpoint stays in use; run the command again to finish.
    """
    failpoints.arm(",".join(armed))
    console = Console(soft_wrap=True, highlight=False)
    chosen = {} if cluster else {"streams.checkpoint_dir": str(state_dir.resolve() / "checkpoints")}
    config = load_config(config_file, os.environ, {**chosen, **parse_overrides(list(overrides))})
    wanted = partitions or config.spark.shuffle_partitions
    if wanted != config.spark.shuffle_partitions:
        console.print(
            f"note: the coordinator starts only once spark.shuffle_partitions = {wanted} "
            f"(the configuration says {config.spark.shuffle_partitions})"
        )
    stack = None
    if cluster:
        spark = build_spark_session(
            SparkSettings(
                app_name="txcoord-state-rebuild",
                master=master,
                warehouse=config.warehouse,
                shuffle_partitions=wanted,
                driver_memory=driver_memory,
            )
        )
    else:
        stack = LocalStack(
            StackSettings(
                state_dir=state_dir.resolve(),
                master=master,
                driver_memory=driver_memory,
                broker_auth=load_broker_auth(auth_file) if auth_file is not None else None,
            ),
            config,
        )
        console.print(str(stack.start_broker()))
        spark = stack.start_spark("txcoord-state-rebuild")
        config = stack.config
    try:
        done = rebuild(spark, config, wanted, source, progress=console.print)
    finally:
        if stack is not None:
            stack.stop()
        else:
            spark.stop()
    console.print(
        f"rebuilt in {done.seconds:.1f} s: {done.transactions} transactions in "
        f"{done.plan.partitions} partitions, now in {done.generation} (from {done.previous}"
        + (
            f", whose batch {done.finished_batch} was finished first"
            if done.finished_batch is not None
            else ""
        )
        + ")"
    )
