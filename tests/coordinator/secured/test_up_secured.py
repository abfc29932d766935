"""`txcoord up --auth-file F` with a [kafka] part: the whole stack on a secured broker."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest

from coordinator.local_stack.broker_auth import load_broker_auth
from coordinator.local_stack.kafka_broker import free_port
from coordinator.sdk import LocalTransactionState, Message, TransactionProducer
from tests.coordinator.sdk.helpers import RecordingListener
from tests.up_process import Up

from .conftest import make_auth_file

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

ADMIN_TOKEN = "admin-token-0123456789abcdef"


def test_up_with_a_kafka_auth_file_runs_the_engine_on_a_secured_broker(tmp_path: Path) -> None:
    tokens = f'[[token]]\nadmin = true\ntoken = "{ADMIN_TOKEN}"\n'
    auth_file = make_auth_file(tmp_path / "auth", rest_tokens=tokens)
    auth = load_broker_auth(auth_file)
    assert auth is not None
    rest_port = free_port()
    up = Up(tmp_path / "var", tmp_path / "warehouse", rest_port,
            options=("--auth-file", str(auth_file)))  # fmt: skip
    try:
        bootstrap = "127.0.0.1:" + up.wait_for(r"txcoord is up: kafka at 127\.0\.0\.1:(\d+)")[1]
        text = up.text()
        assert "spark: healthy" in text and "kafka connector ok" in text, text
        # A group's producer straight to Kafka, as its own principal: the engine (ingest
        # source, coordinator, ticker) reads it over SASL and commits it.
        producer = TransactionProducer(
            group="orders", listener=RecordingListener(), bootstrap_servers=bootstrap,
            kafka_security=auth.groups["orders"].security(), poll_wait_seconds=0.2,
        )  # fmt: skip
        producer.start()
        try:
            sent = producer.send_message_in_transaction(Message(topic="OrderPaid", body=b"x"), 1)
        finally:
            producer.shutdown(timeout=5)
        assert sent.local_state == LocalTransactionState.COMMIT_MESSAGE
        base, headers = f"http://127.0.0.1:{rest_port}", {"Authorization": f"Bearer {ADMIN_TOKEN}"}
        state, deadline = None, time.monotonic() + 240
        while state != "COMMITTED" and time.monotonic() < deadline:
            answer = httpx.get(f"{base}/v1/transactions/{sent.transaction_id}", headers=headers,
                               timeout=10)  # fmt: skip
            state = answer.json().get("state") if answer.status_code == 200 else None
            time.sleep(1)
        assert state == "COMMITTED", up.text()[-3000:]
    finally:
        code = up.stop(signal.SIGINT)
    assert code == 0, up.text()[-3000:]
