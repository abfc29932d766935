"""GET /v1/transactions/{id}: the state, read from real Delta tables (their real schemas)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, get_args

import pytest
from fastapi.testclient import TestClient

from coordinator.core import state_machine
from coordinator.core.config import Config, load_config
from coordinator.rest.app import create_app
from delta_tables import check_requests, half_messages, transactions
from delta_tables.lookup import STATES
from tests.coordinator.rest.conftest import (
    ADMIN_TOKEN,
    BILLING_TOKEN,
    LOCAL,
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
    return {
        **row,
        "kind": "TICK",
        "transaction_id": half_messages.HEARTBEAT_ID,
        "stored_at": stored,
        "ingress_partition": 0,
        "ingress_offset": 1,
        "ingested_at": stored,
    }


def check(tx: str, number: int, requested: datetime, group: str = "orders") -> dict[str, Any]:
    return {
        **message(tx, group),
        "check_number": number,
        "prepared_at": T0,
        "requested_at": requested,
        "batch_id": number,
    }


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
    with TestClient(
        create_app(config), base_url=LOCAL, raise_server_exceptions=False
    ) as test_client:
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
    append(
        config.warehouse,
        check_requests.TABLE,
        [check("tx-1", 2, T0 + timedelta(seconds=36)), check("tx-9", 5, T0)],
    )
    state = state_of(client, "tx-1")
    assert (state["state"], state["check_count"], state["prepared_at"]) == ("CHECKING", 2, ISO_T0)
    assert state["resolved_at"] is None


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        ("COMMITTED", "op"),
        ("ROLLED_BACK", "check"),
        ("DISCARDED", "check_max"),
        ("DISCARDED", "expired"),
    ],
)
def test_a_final_row_is_the_state(
    client: TestClient, config: Config, state: str, reason: str
) -> None:
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
    append(
        config.warehouse,
        transactions.TABLE,
        [
            final("tx-1", "DISCARDED", discarded, "check_max", checks=15, batch=3),
            final(
                "tx-1",
                "COMMITTED",
                discarded + timedelta(minutes=1),
                "operator",
                checks=15,
                batch=4,
            ),
        ],
    )
    assert state_of(client, "tx-1")["state"] == "COMMITTED"


def test_a_resumed_discarded_transaction_is_checking_again(
    client: TestClient, config: Config
) -> None:
    discarded = T0 + timedelta(hours=1)
    append(
        config.warehouse,
        check_requests.TABLE,
        [check("tx-1", n, T0 + timedelta(seconds=30 * n)) for n in range(1, 16)],
    )
    append(
        config.warehouse,
        transactions.TABLE,
        [final("tx-1", "DISCARDED", discarded, "check_max", checks=15)],
    )
    assert state_of(client, "tx-1")["state"] == "DISCARDED"
    # An operator resumed it: the count starts again (RocketMQ's resumeCheckHalfMessage).
    append(
        config.warehouse, check_requests.TABLE, [check("tx-1", 1, discarded + timedelta(minutes=2))]
    )
    state = state_of(client, "tx-1")
    assert (state["state"], state["check_count"], state["resolved_at"]) == ("CHECKING", 1, None)


def final_of(tx: str, group: str, state: str, resolved: datetime) -> dict[str, Any]:
    return {**final(tx, state, resolved, "op"), "producer_group": group}


@pytest.fixture
def secured(config: Config, tmp_path: Path) -> Iterator[TestClient]:
    """The app with the tokens of write_auth_file (orders, billing, ledger, admin)."""
    with_tokens = load_config(
        overrides={
            "warehouse": config.warehouse,
            "rest.auth_file": str(write_auth_file(tmp_path / "tokens.toml")),
        }
    )
    with TestClient(
        create_app(with_tokens), base_url=LOCAL, raise_server_exceptions=False
    ) as test_client:
        yield test_client


def test_a_group_sees_its_own_transactions_only(secured: TestClient, config: Config) -> None:
    append(config.warehouse, half_messages.TABLE, [half("tx-o"), half("tx-b", group="billing")])
    orders, billing = bearer(ORDERS_TOKEN), bearer(BILLING_TOKEN)
    assert secured.get("/v1/transactions/tx-o", headers=orders).json()["producer_group"] == "orders"
    assert secured.get("/v1/transactions/tx-b", headers=billing).status_code == 200
    for tx in ("tx-o", "tx-b"):
        assert secured.get(f"/v1/transactions/{tx}", headers=bearer(ADMIN_TOKEN)).is_success
    assert secured.get("/v1/transactions/tx-o").status_code == 401


def test_another_groups_id_answers_exactly_like_an_id_nobody_has(
    secured: TestClient, config: Config
) -> None:
    """contract 3: nothing one group sends may reveal another group's transaction."""
    append(config.warehouse, half_messages.TABLE, [half("tx-b", group="billing")])
    append(config.warehouse, check_requests.TABLE, [check("tx-c", 1, T0, group="billing")])
    append(config.warehouse, transactions.TABLE, [final_of("tx-f", "billing", "COMMITTED", T0)])
    orders = bearer(ORDERS_TOKEN)

    def answer(path: str) -> tuple[int, dict[str, Any]]:
        response = secured.get(path, headers=orders)
        body = response.json()
        return response.status_code, {**body, "message": body["message"].replace(path, "")}

    for tx in ("tx-b", "tx-c", "tx-f"):
        nobody = answer("/v1/transactions/nobody-has-it")
        theirs = answer(f"/v1/transactions/{tx}")
        assert theirs[0] == nobody[0] == 404
        assert theirs[1]["error"] == nobody[1]["error"] == "not_found"
        # The texts differ only by the id they repeat.
        assert theirs[1]["message"].replace(tx, "X") == nobody[1]["message"].replace(
            "nobody-has-it", "X"
        )
        # Naming the other group is refused before any lookup: the same 403 either way.
        named = secured.get(f"/v1/transactions/{tx}?producer_group=billing", headers=orders)
        unknown = secured.get("/v1/transactions/zz?producer_group=billing", headers=orders)
        assert named.status_code == unknown.status_code == 403
        assert named.json() == unknown.json()
    # Billing's own token sees them; a group token naming its own group is fine.
    assert (
        secured.get(
            "/v1/transactions/tx-b?producer_group=billing", headers=bearer(BILLING_TOKEN)
        ).status_code
        == 200
    )
    assert (
        secured.get("/v1/transactions/tx-f", headers=bearer(BILLING_TOKEN)).json()["state"]
        == "COMMITTED"
    )


def test_one_id_in_two_groups_is_two_transactions(secured: TestClient, config: Config) -> None:
    append(config.warehouse, half_messages.TABLE, [half("same"), half("same", group="billing")])
    append(
        config.warehouse,
        transactions.TABLE,
        [final_of("same", "billing", "ROLLED_BACK", T0 + timedelta(seconds=5))],
    )
    orders = secured.get("/v1/transactions/same", headers=bearer(ORDERS_TOKEN)).json()
    billing = secured.get("/v1/transactions/same", headers=bearer(BILLING_TOKEN)).json()
    assert (orders["producer_group"], orders["state"]) == ("orders", "PREPARED")
    assert (billing["producer_group"], billing["state"]) == ("billing", "ROLLED_BACK")
    admin = bearer(ADMIN_TOKEN)
    named = secured.get("/v1/transactions/same?producer_group=billing", headers=admin)
    assert named.json()["state"] == "ROLLED_BACK"
    # Without a group an admin's question has two answers: it must name one.
    ambiguous = secured.get("/v1/transactions/same", headers=admin)
    assert ambiguous.status_code == 400
    assert "producer_group" in ambiguous.json()["message"]


def test_the_answer_s_states_are_the_state_machine_s() -> None:
    # A Literal must be spelt out: this is where it is checked against the one list.
    assert get_args(STATES) == tuple(state.name for state in state_machine.TransactionState)
