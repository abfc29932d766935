"""`txcoord`: the command line of the transactional-message coordinator."""

from __future__ import annotations

import logging
import sys
from typing import Any, NoReturn

import click

from coordinator.commands.bench import bench
from coordinator.commands.broker import broker
from coordinator.commands.demo import demo
from coordinator.commands.maintain import maintain
from coordinator.commands.provision import provision
from coordinator.commands.transactions import transactions
from coordinator.commands.up import up
from coordinator.program_exit import leave
from core.errors import TxcoordError


class _Group(click.Group):
    """A click group that prints txcoord's own errors as one clear line, without a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except TxcoordError as exc:
            raise click.ClickException(str(exc)) from exc


#: Client libraries that log every request or connection (httpx: one INFO line per request).
NOISY_LOGGERS = ("kafka", "py4j", "httpx", "httpcore")
#: txcoord's own lines per micro-batch (the progress JSON, each writer's step times): one to
#: three a second, which buried `txcoord up`'s status line. Their warnings and errors (rows
#: dropped as late, a check published slim) always show; the lines themselves with -v.
PER_BATCH_LOGGERS = ("txcoord.progress", "streams.coordinator_writer", "streams.ingest_job")


def configure_logging(verbosity: int) -> None:
    """Log txcoord at INFO (DEBUG with -v), the chatty client libraries only at -v and above.

    The client libraries log at WARNING by default, INFO with -v, DEBUG with -vv; txcoord's
    per-batch lines at WARNING by default, INFO with -v.
    """
    logging.basicConfig(
        level=logging.DEBUG if verbosity else logging.INFO,
        format="%(asctime)s %(levelname)-5s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    level = {0: logging.WARNING, 1: logging.INFO}.get(verbosity, logging.DEBUG)
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(level)
    for name in PER_BATCH_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO if verbosity else logging.WARNING)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-v: client requests, -vv: all).")
@click.version_option(package_name="txcoord")
def main(verbose: int) -> None:
    """Transactional messages (RocketMQ's protocol) on Spark Structured Streaming and Delta Lake."""
    configure_logging(verbose)


main.add_command(up)
main.add_command(broker)
main.add_command(demo)
main.add_command(transactions)
main.add_command(maintain)
main.add_command(provision)
main.add_command(bench)


def run() -> NoReturn:
    """Run the `txcoord` program (its console script and `python -m coordinator`).

    Once a command has finished, the process leaves with its exit code at once
    (coordinator/program_exit.py says why).
    """
    code: int = 0
    try:
        main.main(prog_name="txcoord")
    except SystemExit as exc:  # click's standalone mode always ends here
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if isinstance(exc.code, str):
            print(exc.code, file=sys.stderr)
    leave(code)
