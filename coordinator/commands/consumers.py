"""`txcoord consumers`: consumer groups, their members and lag; reset a group's offsets.

    txcoord consumers list [--group G] [--json]     every group's queues: committed, end, lag,
                                                    reader (like kafka-consumer-groups.sh)
    txcoord consumers reset G --topic T --to earliest|latest|2026-11-28T10:00:00Z|shared

The work is coordinator/admin/consumer_groups.py's; this is its command line.
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from coordinator.admin.consumer_groups import describe, live_members, reset
from coordinator.commands.options import local_config, where_options
from coordinator.commands.terminal_text import cell, printable

_where = where_options(
    "Kafka holding the groups' offsets and members (default: the broker `txcoord up` runs "
    "from --state-dir, else the configuration's)."
)


@click.group()
def consumers() -> None:
    """Inspect consumer groups (members, per-queue lag) and reset their offsets."""


@consumers.command("list")
@_where
@click.option("--group", help="Only this consumer group.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def list_(*, group: str | None, as_json: bool, **where: Any) -> None:
    """List every consumer group's queues: committed offset, end, lag and reader."""
    config = local_config(**where)
    rows = describe(config, group)
    members = live_members(config, sorted({row.group for row in rows}))
    if as_json:
        click.echo(
            json.dumps({"members": members, "queues": [row.as_json() for row in rows]}, indent=2)
        )
        return
    if not rows:
        click.echo("consumer groups: none has committed an offset yet")
        return
    lag: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        lag[row.group, row.topic] += row.lag
    console = Console(soft_wrap=True)
    summary = Table(title="consumer groups", title_justify="left")
    for column in ("group", "topic", "lag", "live members"):
        summary.add_column(column)
    for (name, topic), total in sorted(lag.items()):
        live = members.get(name, [])
        summary.add_row(cell(name), cell(topic), str(total), cell(", ".join(live) or "none"))
    console.print(summary)
    detail = Table(title="queues", title_justify="left")
    for column in ("group", "topic/queue", "committed", "end", "lag", "reader", "committed by"):
        detail.add_column(column)
    for row in rows:
        cells = (
            row.group,
            f"{row.topic}/{row.queue_id}",
            str(row.committed),
            str(row.end),
            str(row.lag),
            row.reader or "",
            row.committed_by,
        )
        detail.add_row(*(cell(text) for text in cells))  # escaped, never markup
    console.print(detail)


@consumers.command("reset")
@_where
@click.argument("group")
@click.option("--topic", required=True, help="The topic whose queues' offsets move.")
@click.option(
    "--to",
    "to",
    required=True,
    metavar="earliest|latest|TIME|shared",
    help="earliest (every message again), latest (only new ones), an ISO 8601 time (the "
    "first message delivered at or after it; without a zone, UTC), or shared: what the group "
    "committed in the shared offsets topic (once, when moving to the per-group layout's "
    "offsets topics).",
)
def reset_(*, group: str, topic: str, to: str, **where: Any) -> None:
    """Move a stopped group's offsets of one topic (refused while it has live members)."""
    config = local_config(**where)
    target: str | datetime = to
    if to not in ("earliest", "latest", "shared"):
        try:
            moment = datetime.fromisoformat(to.replace("Z", "+00:00"))
        except ValueError:
            raise click.BadParameter(
                f"{to!r} is not earliest, latest, shared or an ISO 8601 time", param_hint="--to"
            ) from None
        target = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    try:
        offsets = reset(config, group, topic, target)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    for queue_id, offset in offsets.items():
        click.echo(printable(f"{group} {topic}/{queue_id} -> {offset}"))
