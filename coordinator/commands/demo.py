"""`txcoord demo`: sample producers against a running stack, then the outcome table.

Four kinds of transaction, through the SDK and the REST ingress of `txcoord up`:

- commit:            the local transaction commits at once;
- rollback:          it rolls back at once;
- checked-commit:    it answers UNKNOW first, then COMMIT when the coordinator checks;
- never-answers:     UNKNOW, and UNKNOW to every check: checked every
                     transaction_check_interval, DISCARDED after transaction_check_max.

It waits until the first three kinds are decided (or `--wait` runs out) and prints one row
per transaction with the state the REST ingress reports from the Delta tables.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import click
import httpx
from rich.console import Console
from rich.table import Table

from coordinator.core.state_machine import TransactionState as State
from coordinator.sdk import (
    CheckRequest,
    LocalTransactionState,
    Message,
    TransactionListener,
    TransactionProducer,
)

KINDS = ("commit", "rollback", "checked-commit", "never-answers")
DECISIVE = {state.name for state in State if state.is_final}


class DemoListener(TransactionListener):
    """Decides by the kind named in the message's `demo.kind` property."""

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        """Commit, roll back, or not know yet, by kind."""
        return {
            "commit": LocalTransactionState.COMMIT_MESSAGE,
            "rollback": LocalTransactionState.ROLLBACK_MESSAGE,
        }.get(msg.properties["demo.kind"], LocalTransactionState.UNKNOW)

    def check_local_transaction(self, msg: CheckRequest) -> LocalTransactionState:
        """Commit the checked-commit kind; keep not knowing for the others."""
        if msg.properties.get("demo.kind") == "checked-commit":
            return LocalTransactionState.COMMIT_MESSAGE
        return LocalTransactionState.UNKNOW


def _state(client: httpx.Client, tx: str) -> dict[str, Any]:
    response = client.get(f"/v1/transactions/{tx}")
    if response.status_code == 404:
        return {"state": "(not landed yet)", "check_count": 0}
    response.raise_for_status()
    result: dict[str, Any] = response.json()
    return result


@click.command()
@click.option(
    "--endpoint",
    default="http://127.0.0.1:8080",
    show_default=True,
    help="REST ingress of a running `txcoord up`.",
)
@click.option("--token", envvar="TXCOORD_DEMO_TOKEN", help="Bearer token of the group, if any.")
@click.option("--group", default="demo", show_default=True, help="Producer group.")
@click.option("--topic", default="DemoOrders", show_default=True, help="Real topic.")
@click.option(
    "--each",
    type=click.IntRange(1, 1000),
    default=3,
    show_default=True,
    help="Transactions of each kind.",
)
@click.option(
    "--wait",
    type=click.FloatRange(1, 3600),
    default=120,
    show_default=True,
    help="Seconds to wait for the decidable ones.",
)
def demo(
    *, endpoint: str, token: str | None, group: str, topic: str, each: int, wait: float
) -> None:
    """Send sample transactions through the SDK and print how each one ended."""
    console = Console()
    producer = TransactionProducer(group, DemoListener(), endpoint=endpoint, token=token)
    sent: list[tuple[str, str]] = []
    with producer:
        for kind in KINDS:
            for n in range(each):
                message = Message(
                    topic=topic,
                    body=f"{kind} #{n}".encode(),
                    keys=[f"demo-{n}"],
                    properties={"demo.kind": kind},
                    transaction_id=f"demo-{kind}-{n}-{uuid.uuid4().hex[:8]}",
                )
                result = producer.send_message_in_transaction(message)
                sent.append((kind, result.transaction_id))
        console.print(f"sent {len(sent)} transactions to {endpoint}; waiting for outcomes...")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with httpx.Client(base_url=endpoint, headers=headers, timeout=10) as client:
            deadline = time.monotonic() + wait
            states: dict[str, dict[str, Any]] = {}
            while time.monotonic() < deadline:
                states = {tx: _state(client, tx) for _, tx in sent}
                decidable = [tx for kind, tx in sent if kind != "never-answers"]
                if all(states[tx]["state"] in DECISIVE for tx in decidable):
                    break
                time.sleep(2)
    table = Table(title="txcoord demo: outcomes")
    for column in ("kind", "transaction", "state", "checks", "reason"):
        table.add_column(column)
    for kind, tx in sent:
        state = states.get(tx, {})
        table.add_row(
            kind,
            tx,
            str(state.get("state")),
            str(state.get("check_count", 0)),
            str(state.get("reason") or ""),
        )
    console.print(table)
    console.print(
        "never-answers transactions stay CHECKING until transaction_check_max checks "
        "went unanswered, then become DISCARDED.",
        style="dim",
    )
