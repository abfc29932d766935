"""`txcoord demo`: sample producers against a running stack, then the outcome table.

Four kinds of transaction, through the SDK and the REST ingress of `txcoord up`:

- commit:            the local transaction commits at once;
- rollback:          it rolls back at once;
- checked-commit:    it answers UNKNOW first, then COMMIT when the coordinator checks;
- never-answers:     UNKNOW, and UNKNOW to every check: checked every
                     transaction_check_interval, DISCARDED after transaction_check_max.

It waits until the first three kinds are decided (or `--wait` runs out) and prints one row
per transaction with the state the REST ingress reports from the Delta tables. Then the other
side (contract 5.5): a member of consumer group `<group>-readers` receives the committed
messages of the run by queue and offset through the ingress, acknowledges them, and prints
where each one was read from and how long after its commit it was in its topic table. The
checks of the checked-commit kind went to this very producer instance first (contract 5.3):
the table says which instance answered.
"""

from __future__ import annotations

import time
import uuid
from datetime import datetime
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
    """Decides by the kind named in the message's `demo.kind` property; remembers which
    transactions it was asked about (checks come to the instance that sent the half first)."""

    def __init__(self) -> None:
        self.checked: set[str] = set()

    def execute_local_transaction(self, msg: Message, arg: Any) -> LocalTransactionState:
        """Commit, roll back, or not know yet, by kind."""
        return {
            "commit": LocalTransactionState.COMMIT_MESSAGE,
            "rollback": LocalTransactionState.ROLLBACK_MESSAGE,
        }.get(msg.properties["demo.kind"], LocalTransactionState.UNKNOW)

    def check_local_transaction(self, msg: CheckRequest) -> LocalTransactionState:
        """Commit the checked-commit kind; keep not knowing for the others."""
        self.checked.add(msg.transaction_id)
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
@click.option(
    "--token",
    envvar="TXCOORD_DEMO_TOKEN",
    help="Bearer token of the group, if any; reading back also needs it to consume as "
    "consumer group <group>-readers on the topic ([[token.consume]]).",
)
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
    """Send sample transactions through the SDK, print how each one ended, then read the
    committed ones back as a consumer group."""
    console = Console()
    listener = DemoListener()
    producer = TransactionProducer(group, listener, endpoint=endpoint, token=token)
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
    for column in ("kind", "transaction", "state", "checks", "answered by", "reason"):
        table.add_column(column)
    for kind, tx in sent:
        state = states.get(tx, {})
        table.add_row(
            kind,
            tx,
            str(state.get("state")),
            str(state.get("check_count", 0)),
            f"sender {producer.instance_id}" if tx in listener.checked else "",
            str(state.get("reason") or ""),
        )
    console.print(table)
    console.print(
        "never-answers transactions stay CHECKING until transaction_check_max checks "
        "went unanswered, then become DISCARDED.",
        style="dim",
    )
    committed = [tx for _, tx in sent if states.get(tx, {}).get("state") == State.COMMITTED.name]
    if committed:
        _consume(
            console,
            endpoint=endpoint,
            headers=headers,
            group=f"{group}-readers",
            topic=topic,
            committed=committed,
        )


def _consume(
    console: Console,
    *,
    endpoint: str,
    headers: dict[str, str],
    group: str,
    topic: str,
    committed: list[str],
) -> None:
    """Receive and acknowledge the run's committed messages as a member of consumer `group`."""
    wanted, read = set(committed), dict[str, dict[str, Any]]()
    member: str | None = None
    with httpx.Client(base_url=endpoint, headers=headers, timeout=30) as client:
        deadline = time.monotonic() + 60
        while wanted - read.keys() and time.monotonic() < deadline:
            body: dict[str, Any] = {"topic": topic, "start_from": "first", "wait_seconds": 5}
            if member is not None:
                body["member"] = member
            response = client.post(f"/v1/consumer-groups/{group}/receive", json=body)
            if response.status_code != 200:
                console.print(f"consumer group {group}: {response.status_code} {response.text}")
                return
            answer = response.json()
            member = answer["member"]
            messages = answer["messages"]
            if messages:
                receipts = [m["receipt"] for m in messages]
                client.post(
                    f"/v1/consumer-groups/{group}/ack",
                    json={"member": member, "receipts": receipts},
                ).raise_for_status()
            read |= {m["transaction_id"]: m for m in messages if m["transaction_id"] in wanted}
    table = Table(title=f"txcoord demo: read back by consumer group {group}")
    for column in ("transaction", "topic", "queue", "offset", "in its topic after commit"):
        table.add_column(column)
    for tx in committed:
        message = read.get(tx)
        if message is None:
            table.add_row(tx, topic, "", "", "(not read within 60 s)")
            continue
        visible = datetime.fromisoformat(message["delivered_at"]) - datetime.fromisoformat(
            message["committed_at"]
        )
        table.add_row(
            tx,
            message["topic"],
            str(message["queue_id"]),
            str(message["queue_offset"]),
            f"{visible.total_seconds():.2f} s",
        )
    console.print(table)
