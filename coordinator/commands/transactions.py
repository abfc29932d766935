"""`txcoord transactions`: operator commands in the spirit of Kafka's kafka-transactions.sh.

    txcoord transactions list [--state S] [--group G]     every transaction the tables know
    txcoord transactions describe TX                     its state and history, table by table
    txcoord transactions find-hanging --older-than 5m    undecided for longer than that
    txcoord transactions commit|rollback TX --reason ... end one as an operator
    txcoord transactions resume TX --reason ...          check a DISCARDED one again

Reads come from the warehouse's Delta tables (no Spark needed); operator ops go to the op
topic like any op and are applied by the running coordinator, recorded with who and why.

Who: on a secured deployment (`[kafka] topics_per_group = true`) the op goes to the
operator's own topic `txcoord.operator.<principal>`, which only that SASL principal may write
(coordinator/runtime/local_stack/broker_auth.py), and the coordinator records the principal as who
did it; `--operator` is then at most a display name beside it ("ops-admin (alice)"). On an
open broker anyone may write the op topic, and who is what `--operator` says.
"""

from __future__ import annotations

import getpass
import json
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from coordinator.admin import inventory
from coordinator.admin.operator_ops import APPLIES_IN, either, send_operator_op
from coordinator.commands.options import local_config, where_options
from coordinator.core import state_machine
from coordinator.core.config import parse_duration
from coordinator.core.errors import ConfigurationError
from coordinator.core.kafka_security import KafkaSecurity
from delta_tables.lookup import TransactionState

STATES = tuple(state.name for state in state_machine.TransactionState)


@dataclass(frozen=True)
class Target:
    """Where the commands read and write."""

    warehouse: str
    bootstrap_servers: str
    op_topic: str
    security: KafkaSecurity = field(default_factory=KafkaSecurity)


def _target(
    config_file: Path | None,
    overrides: tuple[str, ...],
    warehouse: Path | None,
    bootstrap_servers: str | None,
    state_dir: Path,
) -> Target:
    config = local_config(config_file, overrides, warehouse, bootstrap_servers, state_dir)
    try:
        # Per-group layout: the operator's own topic, so that the broker vouches for who
        # sent the op (coordinator/core/topics.py); the shared op topic otherwise.
        op_topic = config.kafka.layout.operator_topic(config.kafka.sasl_username or None)
    except ValueError as exc:
        raise ConfigurationError(f"[kafka] topics_per_group: {exc}") from exc
    return Target(
        warehouse=config.warehouse,
        bootstrap_servers=config.kafka.bootstrap_servers,
        op_topic=op_topic,
        security=config.kafka.security,
    )


_where = where_options(
    "Kafka to send operator ops to (default: the broker `txcoord up` runs from --state-dir, "
    "else the configuration's)."
)


def _as_json(state: TransactionState) -> dict[str, Any]:
    return state.model_dump()


def _print_table(states: list[TransactionState], title: str) -> None:
    console = Console(soft_wrap=True)
    now = datetime.now(UTC)
    table = Table(title=title, title_justify="left")
    for column in ("transaction", "group", "topic/queue", "state", "checks", "age", "reason"):
        table.add_column(column)
    for s in states:
        # Text, never a markup string: an id may be `[/x]` or `[link=...]` (any producer
        # chooses its ids), which rich would otherwise parse, fail on, or render as a link.
        cells = (
            s.transaction_id,
            s.producer_group,
            f"{s.topic}/{s.queue_id}",
            s.state,
            str(s.check_count),
            _age(inventory.age_seconds(s, now)),
            s.reason or "",
        )
        table.add_row(*(Text(cell or "") for cell in cells))
    console.print(table)


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _emit(states: list[TransactionState], as_json: bool, title: str) -> None:
    if as_json:
        click.echo(json.dumps([_as_json(s) for s in states], indent=2))
    elif states:
        _print_table(states, title)
    else:
        click.echo(f"{title}: none")


@click.group()
def transactions() -> None:
    """Inspect transactions and act on them as an operator (like kafka-transactions.sh)."""


@transactions.command("list")
@_where
@click.option(
    "--state",
    "states",
    multiple=True,
    type=click.Choice(STATES),
    help="Only transactions in this state (repeatable).",
)
@click.option("--group", help="Only this producer group's transactions.")
@click.option(
    "--limit",
    type=click.IntRange(1),
    default=100,
    show_default=True,
    help="Show the newest this many.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_(
    *, states: tuple[str, ...], group: str | None, limit: int, as_json: bool, **where: Any
) -> None:
    """List the transactions the tables know, oldest first."""
    target = _target(**where)
    found = inventory.all_transactions(target.warehouse, states, group)
    shown = found[-limit:]
    title = f"{len(shown)} of {len(found)} transaction(s)"
    _emit(shown, as_json, title)


@transactions.command("find-hanging")
@_where
@click.option(
    "--older-than",
    default="1m",
    show_default=True,
    help="Age since the half was stored that counts as hanging: 30s, 5m.",
)
@click.option("--group", help="Only this producer group's transactions.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def find_hanging(*, older_than: str, group: str | None, as_json: bool, **where: Any) -> None:
    """List undecided (PREPARED or CHECKING) transactions older than --older-than."""
    try:
        age = parse_duration(older_than, "--older-than").total_seconds()
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc), param_hint="--older-than") from None
    target = _target(**where)
    found = inventory.hanging(target.warehouse, age, group)
    _emit(found, as_json, f"{len(found)} hanging transaction(s) older than {older_than}")


_GROUP_OF_ONE = click.option(
    "--group",
    "producer_group",
    help="The transaction's producer group (needed when several groups use the id).",
)


def _found(target: Target, transaction_id: str, group: str | None) -> inventory.Description:
    """Return the transaction (group, id) of the warehouse, or exit with why not."""
    try:
        found = inventory.describe(target.warehouse, transaction_id, group)
    except inventory.AmbiguousTransactionError as exc:
        raise click.ClickException(str(exc)) from None
    if found is None:
        of = f" of group {group!r}" if group is not None else ""
        raise click.ClickException(
            f"unknown transaction {transaction_id!r}{of} in {target.warehouse}"
        )
    return found


@transactions.command()
@_where
@click.argument("transaction_id")
@_GROUP_OF_ONE
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def describe(
    *, transaction_id: str, producer_group: str | None, as_json: bool, **where: Any
) -> None:
    """Show one transaction's state and everything the tables recorded about it."""
    target = _target(**where)
    found = _found(target, transaction_id, producer_group)
    if as_json:
        history = [
            {"at": e.at.isoformat(), "table": e.table, "what": e.what} for e in found.history
        ]
        click.echo(json.dumps({**_as_json(found.state), "history": history}, indent=2))
        return
    s = found.state
    click.echo(f"transaction  {s.transaction_id}")
    click.echo(f"state        {s.state}" + (f" (reason {s.reason})" if s.reason else ""))
    click.echo(f"group        {s.producer_group}")
    click.echo(f"topic/queue  {s.topic}/{s.queue_id}   msg id {s.msg_id}")
    click.echo(f"checks       {s.check_count}")
    click.echo(f"prepared at  {s.prepared_at}   resolved at {s.resolved_at or '-'}")
    click.echo("history:")
    for event in found.history:
        at = event.at.isoformat(timespec="milliseconds")
        click.echo(f"  {at}  {event.table:<22} {event.what}")


def _operator_command(op: str, summary: str) -> click.Command:
    @_where
    @click.argument("transaction_id")
    @_GROUP_OF_ONE
    @click.option("--reason", required=True, help="Why (recorded with the op).")
    @click.option(
        "--operator",
        default=getpass.getuser,
        show_default="your user name",
        help="Who (recorded with the op). On a secured deployment the recorded "
        "who is your Kafka principal, this beside it as display name.",
    )
    @click.option(
        "--wait",
        "wait_seconds",
        type=click.FloatRange(0),
        default=60.0,
        show_default=True,
        help="Seconds to wait for the coordinator's verdict; 0: only send.",
    )
    def command(
        *,
        transaction_id: str,
        producer_group: str | None,
        reason: str,
        operator: str,
        wait_seconds: float,
        **where: Any,
    ) -> None:
        target = _target(**where)
        found = _found(target, transaction_id, producer_group)
        sent = send_operator_op(
            target.bootstrap_servers,
            target.op_topic,
            found.state,
            op,
            security=target.security,
            operator=operator,
            reason=reason,
        )
        click.echo(f"{op} {sent.op_id} for {transaction_id} stored in {target.op_topic}")
        if wait_seconds > 0:
            _await_verdict(target, found.state, sent.op_id, wait_seconds)

    command.__doc__ = summary
    return click.command(op.lower())(command)


def _await_verdict(
    target: Target, state: TransactionState, op_id: str, wait_seconds: float
) -> None:
    transaction_id = state.transaction_id
    deadline = time.monotonic() + wait_seconds
    click.echo("waiting for the coordinator's verdict ...")
    while (verdict := inventory.verdict_of(target.warehouse, transaction_id, op_id)) is None:
        if time.monotonic() >= deadline:
            raise click.ClickException(
                f"op {op_id} is stored but was not judged within {wait_seconds:g} s: is the "
                f"coordinator running? (it applies the op when it runs; "
                f"`txcoord transactions describe {transaction_id}` shows the outcome)"
            )
        time.sleep(1.0)
    detail = f" ({verdict['detail']})" if verdict["detail"] else ""
    click.echo(f"verdict: {verdict['verdict']}{detail}")
    if verdict["verdict"] != "APPLIED":
        raise click.ClickException(f"op {op_id} changed nothing: {verdict['verdict']}")
    now = inventory.describe(target.warehouse, transaction_id, state.producer_group)
    if now is not None:
        click.echo(f"{transaction_id} is now {now.state.state}")


#: Each operator op's help; the states it applies in come from the state machine.
_SUMMARIES: dict[str, str] = {
    state_machine.Event.COMMIT: "Commit a {} transaction as an operator.",
    state_machine.Event.ROLLBACK: "Roll back a {} transaction as an operator.",
    state_machine.Event.RESUME: "Check a {} transaction again, count reset "
    "(resumeCheckHalfMessage).",
}
for _op, _states in APPLIES_IN.items():
    transactions.add_command(_operator_command(_op, _SUMMARIES[_op].format(either(_states))))
