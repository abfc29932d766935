"""GET /v1/transactions/{id}: the state, read from real Delta tables (their real schemas)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from coordinator.config import Config, load_config
from coordinator.rest.app import create_app
from delta_tables import check_requests, half_messages, transactions
from tests.coordinator.rest.conftest import (
    ADMIN_TOKEN,
    BILLING_TOKEN,
    ORDERS_TOKEN,
    bearer,
    write_auth_file,
)
from tests.coordinator.rest.delta_io import append

T0 = datetime(2025, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
ISO_T0 = "2025-01-02T03:04:05.678Z"


def message(tx: str, group: str = "orders") -> dict[str, Any]:
    return {
        "transaction_id": tx, "msg_id": f"MSG-{tx}", "producer_group": group,
        "topic": "OrderPaid", "queue_id": 2, "body": b"body", "keys": ["k"], "tags": "t",
        "properties": [("p", "v")],
    }  # fmt: skip


def half(tx: str, group: str = "orders", stored: datetime = T0) -> dict[str, Any]:
    return {
        "kind": "HALF", **message(tx, group), "check_immunity_seconds": None, "born_at": None,
        "stored_at": stored, "ingress_partition": 0, "ingress_offset": 7, "ingested_at": stored,
    }  # fmt: skip


def heartbeat(stored: datetime) -> dict[str, Any]:
    row = {name: None for name in half_messages.SCHEMA.names}
    return {**row, "kind": "TICK", "transaction_id": half_messages.HEARTBEAT_ID,
            "stored_at": stored, "ingress_partition": 0, "ingress_offset": 1,
            "ingested_at": stored}  # fmt: skip


def check(tx: str, number: int, requested: datetime, group: str = "orders") -> dict[str, Any]:
    return {**message(tx, group), "check_number": number, "prepared_at": T0,
            "requested_at": requested, "batch_id": number}  # fmt: skip


def final(
    tx: str, state: str, resolved: datetime, reason: str, *, checks: int = 0, batch: int = 9
) -> dict[str, Any]:
    return {
        "transaction_id": tx, "msg_id": f"MSG-{tx}", "producer_group": "orders",
        "topic": "OrderPaid", "queue_id": 2, "state": state, "reason": reason,
        "check_count": checks, "deciding_op_id": None, "prepared_at": T0,
        "resolved_at": resolved, "batch_id": batch,
    }  # fmt: skip


@pytest.fixture
def config(tmp_path: Path) -> Config:
    # No Kafka here: the app makes its producer and consumers only when a route needs them.
    return load_config(overrides={"warehouse": str(tmp_path / "warehouse")})


@pytest.fixture
def client(config: Config) -> Iterator[TestClient]:
    with TestClient(create_app(config), raise_server_exceptions=False) as test_client:
        yield test_client


def state_of(client: TestClient, tx: str) -> dict[str, Any]:
    answer = client.get(f"/v1/transactions/{tx}")
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_an_empty_warehouse_answers_404_not_500(client: TestClient) -> None:
    answer = client.get("/v1/transactions/tx-1")
    assert answer.status_code == 404
    assert answer.json()["error"] == "not_found"


def test_a_landed_half_is_prepared(client: TestClient, config: Config) -> None:
    append(config.warehouse, half_messages.TABLE, [half("tx-1"), heartbeat(T0), half("other")])
    assert state_of(client, "tx-1") == {
        "transaction_id": "tx-1", "producer_group": "orders", "topic": "OrderPaid",
        "queue_id": 2, "msg_id": "MSG-tx-1", "state": "PREPARED", "check_count": 0,
        "prepared_at": ISO_T0, "resolved_at": None, "reason": None,
    }  # fmt: skip
    assert client.get("/v1/transactions/tx-2").status_code == 404
    # A heartbeat row is not a transaction, whatever its id.
    assert client.get(f"/v1/transactions/{half_messages.HEARTBEAT_ID.strip()}").status_code == 404


def test_check_requests_make_it_checking_and_new_rows_are_seen(
    client: TestClient, config: Config
) -> None:
    append(config.warehouse, half_messages.TABLE, [half("tx-1")])
    assert state_of(client, "tx-1")["state"] == "PREPARED"
    append(config.warehouse, check_requests.TABLE, [check("tx-1", 1, T0 + timedelta(seconds=6))])
    append(config.warehouse, check_requests.TABLE, [check("tx-1", 2, T0 + timedelta(seconds=36)),
                                                    check("tx-9", 5, T0)])  # fmt: skip
    state = state_of(client, "tx-1")
    assert (state["state"], state["check_count"], state["prepared_at"]) == ("CHECKING", 2, ISO_T0)
    assert state["resolved_at"] is None


@pytest.mark.parametrize(
    ("state", "reason"),
    [("COMMITTED", "op"), ("ROLLED_BACK", "check"), ("DISCARDED", "check_max"),
     ("DISCARDED", "expired")],
)  # fmt: skip
def test_a_final_row_is_the_state(client: TestClient, config: Config, state: str,
                                  reason: str) -> None:  # fmt: skip
    resolved = T0 + timedelta(minutes=5)
    append(config.warehouse, half_messages.TABLE, [half("tx-1")])
    append(config.warehouse, check_requests.TABLE, [check("tx-1", 1, T0 + timedelta(seconds=6))])
    append(config.warehouse, transactions.TABLE, [final("tx-1", state, resolved, reason, checks=1)])
    assert state_of(client, "tx-1") == {
        "transaction_id": "tx-1", "producer_group": "orders", "topic": "OrderPaid",
        "queue_id": 2, "msg_id": "MSG-tx-1", "state": state, "check_count": 1,
        "prepared_at": ISO_T0, "resolved_at": "2025-01-02T03:09:05.678Z", "reason": reason,
    }  # fmt: skip


def test_the_newest_final_row_wins(client: TestClient, config: Config) -> None:
    discarded = T0 + timedelta(hours=1)
    append(config.warehouse, transactions.TABLE, [
        final("tx-1", "DISCARDED", discarded, "check_max", checks=15, batch=3),
        final("tx-1", "COMMITTED", discarded + timedelta(minutes=1), "operator", checks=15,
              batch=4),
    ])  # fmt: skip
    assert state_of(client, "tx-1")["state"] == "COMMITTED"


def test_a_resumed_discarded_transaction_is_checking_again(
    client: TestClient, config: Config
) -> None:
    discarded = T0 + timedelta(hours=1)
    append(config.warehouse, check_requests.TABLE,
           [check("tx-1", n, T0 + timedelta(seconds=30 * n)) for n in range(1, 16)])  # fmt: skip
    append(config.warehouse, transactions.TABLE,
           [final("tx-1", "DISCARDED", discarded, "check_max", checks=15)])  # fmt: skip
    assert state_of(client, "tx-1")["state"] == "DISCARDED"
    # An operator resumed it: the count starts again (RocketMQ's resumeCheckHalfMessage).
    append(config.warehouse, check_requests.TABLE,
           [check("tx-1", 1, discarded + timedelta(minutes=2))])  # fmt: skip
    state = state_of(client, "tx-1")
    assert (state["state"], state["check_count"], state["resolved_at"]) == ("CHECKING", 1, None)


def test_another_groups_transaction_is_403(config: Config, tmp_path: Path) -> None:
    append(config.warehouse, half_messages.TABLE, [half("tx-o"), half("tx-b", group="billing")])
    secured = load_config(overrides={
        "warehouse": config.warehouse,
        "rest.auth_file": str(write_auth_file(tmp_path / "tokens.toml")),
    })  # fmt: skip
    with TestClient(create_app(secured), raise_server_exceptions=False) as client:
        orders, billing = bearer(ORDERS_TOKEN), bearer(BILLING_TOKEN)
        assert client.get("/v1/transactions/tx-o", headers=orders).status_code == 200
        answer = client.get("/v1/transactions/tx-b", headers=orders)
        assert answer.status_code == 403
        assert answer.json()["error"] == "forbidden"
        assert client.get("/v1/transactions/tx-b", headers=billing).status_code == 200
        assert client.get("/v1/transactions/tx-o", headers=billing).status_code == 403
        for tx in ("tx-o", "tx-b"):
            assert client.get(f"/v1/transactions/{tx}", headers=bearer(ADMIN_TOKEN)).is_success
        assert client.get("/v1/transactions/tx-o").status_code == 401
        assert client.get("/v1/transactions/unknown", headers=orders).status_code == 404
