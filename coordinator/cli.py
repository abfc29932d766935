"""`txcoord`: the command line of the transactional-message coordinator."""

from __future__ import annotations

import importlib
import logging
import sys
from typing import Any, NoReturn

import click

from coordinator.core.errors import TxcoordError
from coordinator.core.library_logs import demote_transient_library_errors
from coordinator.program_exit import leave

#: Every command (the function of that name in coordinator/commands/<name>.py) and its summary
#: for `--help`: the first sentence of its docstring (tests/coordinator/test_cli_commands.py
#: checks).
#: A command's module is imported only when that command runs (or shows its own help): the
#: engine's commands import Spark, Arrow and Delta, which a producer's install (`pip install
#: txcoord`, no extra) does not have, and which every other command would pay for at start.
COMMANDS: dict[str, str] = {
    "up": "Run the whole local stack in the foreground until Ctrl-C.",
    "broker": "Run the local Kafka broker (KRaft, 127.0.0.1) on its own.",
    "demo": (
        "Send sample transactions through the SDK, print how each one ended, then read the "
        "committed ones back as a consumer group."
    ),
    "transactions": "Inspect transactions and act on them as an operator "
    "(like kafka-transactions.sh).",
    "consumers": "Inspect consumer groups (members, per-queue lag) and reset their offsets.",
    "maintain": "OPTIMIZE and VACUUM every table of the warehouse without breaking a running "
    "stream.",
    "state": "Move the coordinator's state: rescale it, rebuild it, upgrade it.",
    "provision": "Create producer groups' and operators' own topics; print the ACLs to grant.",
    "bench": "Measure txcoord end to end on this machine, with Kafka's transactions as the peer.",
}
#: txcoord's own packages: a module of these missing is a broken install, not a missing extra.
OWN_PACKAGES = ("coordinator", "delta_tables", "streams")


def _needs_engine(name: str, missing: str) -> click.Command:
    """Return a stand-in for command `name`, whose module imports `missing`, not installed."""

    def refuse() -> None:
        raise click.ClickException(
            f"txcoord {name} needs the engine's packages ({missing} is not installed): "
            "pip install 'txcoord[engine]'"
        )

    anything = {"ignore_unknown_options": True, "allow_extra_args": True}
    return click.Command(
        name,
        callback=refuse,
        add_help_option=False,
        context_settings=anything,
        help=f"{COMMANDS[name]} (needs txcoord[engine])",
    )


class _Group(click.Group):
    """txcoord's command group: commands loaded on use, txcoord's own errors as one clear line."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        try:  # each command is the function of its name in its own module
            module = importlib.import_module(f"coordinator.commands.{cmd_name}")
        except ModuleNotFoundError as exc:
            package = (exc.name or "").split(".")[0]
            if not package or package in OWN_PACKAGES:
                raise
            return _needs_engine(cmd_name, package)
        command: click.Command = getattr(module, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the commands from COMMANDS, without importing any of them."""
        with formatter.section("Commands"):
            formatter.write_dl(list(COMMANDS.items()))

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
PER_BATCH_LOGGERS = (
    "txcoord.progress",
    "streams.query.batch_writer",
    "streams.ingest.landing_query",
    "streams.kafka_io.check_publisher",
)


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
    demote_transient_library_errors()


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", count=True, help="More logging (-v: client requests, -vv: all).")
@click.version_option(package_name="txcoord")
def main(verbose: int) -> None:
    """Transactional messages (RocketMQ's protocol) on Spark Structured Streaming and Delta Lake."""
    configure_logging(verbose)


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
