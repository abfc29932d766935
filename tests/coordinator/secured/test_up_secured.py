"""`txcoord up --auth-file F` with a [kafka] part: the whole stack on a secured broker.

The broker keeps the groups apart (per-group topics and ACLs, coordinator/core/topics.py), and the
coordinator trusts only what the broker vouched for: a group's record that names another
group, or an operator's op sent from a group's topic, decides nothing and is quarantined as
refused; an operator's op from the operator's own topic is recorded with its principal.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from deltalake import DeltaTable

from coordinator.core.topics import TopicLayout
from coordinator.protocol.records import half_headers, op_headers
from coordinator.runtime.local_stack.broker_auth import BrokerAuth, load_broker_auth
from coordinator.runtime.local_stack.ports import free_port
from coordinator.sdk import LocalTransactionState, Message, TransactionProducer
from tests.coordinator.sdk.helpers import RecordingListener, wait_until
from tests.up_process import Up

from .conftest import make_auth_file, publish, read_all

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

ADMIN_TOKEN = "admin-token-0123456789abcdef"


def test_up_with_a_kafka_auth_file_runs_the_engine_on_a_secured_broker(tmp_path: Path) -> None:
    tokens = f'[[token]]\nadmin = true\ntoken = "{ADMIN_TOKEN}"\n'
    auth_file = make_auth_file(tmp_path / "auth", rest_tokens=tokens)
    auth = load_broker_auth(auth_file)
    assert auth is not None
    rest_port = free_port()
    up = Up(
        tmp_path / "var", tmp_path / "warehouse", rest_port, options=("--auth-file", str(auth_file))
    )
    try:
        bootstrap = "127.0.0.1:" + up.wait_for(r"txcoord is up: kafka at 127\.0\.0\.1:(\d+)")[1]
        text = up.text()
        assert "spark: healthy" in text and "kafka connector ok" in text, text
        # A group's producer straight to Kafka, as its own principal: the engine (ingest
        # source, coordinator, ticker) reads it over SASL and commits it.
        producer = TransactionProducer(
            group="orders",
            listener=RecordingListener(),
            bootstrap_servers=bootstrap,
            kafka_security=auth.groups["orders"].security(),
            topics_per_group=True,
            poll_wait_seconds=0.2,
        )
        producer.start()
        try:
            sent = producer.send_message_in_transaction(Message(topic="OrderPaid", body=b"x"), 1)
        finally:
            producer.shutdown(timeout=5)
        assert sent.local_state == LocalTransactionState.COMMIT_MESSAGE
        base, headers = f"http://127.0.0.1:{rest_port}", {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        state, deadline = None, time.monotonic() + 240
        while state != "COMMITTED" and time.monotonic() < deadline:
            answer = httpx.get(
                f"{base}/v1/transactions/{sent.transaction_id}", headers=headers, timeout=10
            )
            state = answer.json().get("state") if answer.status_code == 200 else None
            time.sleep(1)
        assert state == "COMMITTED", up.text()[-3000:]
        stack = Secured(bootstrap, base, headers, tmp_path / "warehouse", auth)
        the_broker_vouches_for_groups_and_operators(stack)
    finally:
        code = up.stop(signal.SIGINT)
    assert code == 0, up.text()[-3000:]


@dataclass(frozen=True)
class Secured:
    """The running secured stack, as its clients see it."""

    bootstrap: str
    base: str  # the REST ingress
    headers: dict[str, str]  # the admin token
    warehouse: Path
    auth: BrokerAuth

    def state_of(self, transaction_id: str) -> Any:
        answer = httpx.get(
            f"{self.base}/v1/transactions/{transaction_id}", headers=self.headers, timeout=10
        )
        return answer.json().get("state")


def the_broker_vouches_for_groups_and_operators(stack: Secured) -> None:
    """Forged records are refused; the operator acts from its own topic; checks per group."""
    bootstrap, auth = stack.bootstrap, stack.auth
    layout = TopicLayout(per_group=True)
    orders = auth.groups["orders"].security()
    stamp = int(time.time() * 1000)
    publish(
        bootstrap,
        layout.half_topic("orders"),
        [
            (b"tx-held", b"held", half_headers("orders", "OrderPaid", stamp)),
            (b"tx-unanswered", b"checked", half_headers("orders", "OrderPaid", stamp)),
            (b"tx-forged", b"forged", half_headers("payments", "OrderPaid", stamp)),
        ],
        orders,
    )
    publish(
        bootstrap,
        layout.op_topic("orders"),
        [
            (b"tx-held", b"", op_headers("orders", "COMMIT", False, stamp, operator="mallory")),
        ],
        orders,
    )

    def quarantined() -> list[dict[str, Any]]:
        return rows(stack.warehouse / "system" / "quarantine")

    wait_until(lambda: len(quarantined()) >= 2, timeout=120, what="the refused records")
    reasons = {r["key"]: r["reason"] for r in quarantined()}
    assert reasons[b"tx-forged"].startswith("refused: header txcoord.producer_group"), reasons
    assert reasons[b"tx-held"].startswith("refused: an operator's op"), reasons
    # The forged op decided nothing (it never became an op record, asserted below): tx-held
    # waits for its checks. Its half may land a moment after the quarantine (two commits).
    wait_until(
        lambda: stack.state_of("tx-held") in ("PREPARED", "CHECKING"),
        timeout=60,
        what="tx-held known and undecided",
    )

    # The operator commits it, from its own topic; the recorded who is its principal.
    operator = auth.operator.security()
    environ = {
        **os.environ,
        **{f"TXCOORD_KAFKA__{k.upper()}": str(v) for k, v in asdict(operator).items()},
        "TXCOORD_KAFKA__TOPICS_PER_GROUP": "true",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "coordinator",
            "transactions",
            "commit",
            "tx-held",
            "--reason",
            "paid by phone",
            "--operator",
            "Alice",
            "--warehouse",
            str(stack.warehouse),
            "--bootstrap-servers",
            bootstrap,
            "--wait",
            "120",
        ],
        check=False,
        env=environ,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert layout.operator_topic("txcoord-operator") in done.stdout, done.stdout
    ops = rows(stack.warehouse / "system" / "op_records")
    (by_operator,) = [r for r in ops if r["operator"] is not None]
    assert (by_operator["transaction_id"], by_operator["operator"]) == (
        "tx-held",
        "txcoord-operator (Alice)",
    )
    wait_until(
        lambda: stack.state_of("tx-held") == "COMMITTED",
        timeout=60,
        what="tx-held committed by the operator",
    )

    # Checks go to the group's own check topic, which its principal reads.
    def checked() -> bool:
        found = read_all(bootstrap, layout.check_topic("orders"), 1, orders)
        return any(r.key == b"tx-unanswered" for r in found)

    wait_until(checked, timeout=120, what="a check of tx-unanswered on orders' topic")

    # An admin token's op through the REST ingress goes to the engine's own operator topic
    # (on the shared op topic it would be quarantined) and is recorded with the token's name.
    answer = httpx.post(
        f"{stack.base}/v1/transactions/tx-unanswered/rollback",
        headers=stack.headers,
        json={"producer_group": "orders", "operator": "Bob", "reason": "never paid"},
        timeout=30,
    )
    assert answer.status_code == 202, answer.text
    wait_until(
        lambda: stack.state_of("tx-unanswered") == "ROLLED_BACK",
        timeout=120,
        what="tx-unanswered rolled back by the admin token",
    )
    ops = rows(stack.warehouse / "system" / "op_records")
    by_rest = [r["operator"] for r in ops if r["transaction_id"] == "tx-unanswered"]
    assert [who for who in by_rest if who is not None] == ["admin (Bob)"], by_rest


def rows(table: Path) -> list[dict[str, Any]]:
    """Return every row of Delta table `table` (none while it does not exist yet)."""
    if not (table / "_delta_log").is_dir():
        return []
    found: list[dict[str, Any]] = DeltaTable(str(table)).to_pyarrow_table().to_pylist()
    return found
