"""The operators' inventory: a transaction is (producer group, transaction id) (contract 3).

Real Delta tables on disk, written with their real schemas; no Spark, no Kafka.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from coordinator.admin import inventory
from coordinator.commands.transactions import transactions as transactions_command
from delta_tables import half_messages, op_records, transactions
from tests.coordinator.rest.delta_io import append
from tests.coordinator.rest.test_lookup import T0, final_of, half


def op(tx: str, group: str, kind: str, offset: int) -> dict[str, Any]:
    return {
        "kind": "OP", "op_id": f"op-0000-{offset:016X}", "transaction_id": tx,
        "producer_group": group, "op": kind, "from_check": False, "operator": None,
        "reason": None, "born_at": None, "stored_at": T0 + timedelta(seconds=1),
        "ingress_partition": 0, "ingress_offset": offset, "ingested_at": T0,
    }  # fmt: skip


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    """One id used by two groups: orders still PREPARED, billing rolled back."""
    location = str(tmp_path / "warehouse")
    append(location, half_messages.TABLE, [half("same"), half("same", group="billing")])
    append(location, op_records.TABLE, [op("same", "billing", "ROLLBACK", 3)])
    append(
        location,
        transactions.TABLE,
        [final_of("same", "billing", "ROLLED_BACK", T0 + timedelta(seconds=5))],
    )
    return location


def test_one_id_in_two_groups_is_listed_as_two_transactions(warehouse: str) -> None:
    listed = {(s.producer_group, s.state) for s in inventory.all_transactions(warehouse)}
    assert listed == {("orders", "PREPARED"), ("billing", "ROLLED_BACK")}
    only = inventory.all_transactions(warehouse, group="orders")
    assert [(s.producer_group, s.state) for s in only] == [("orders", "PREPARED")]
    hanging = inventory.hanging(warehouse, 0)
    assert [(s.producer_group, s.state) for s in hanging] == [("orders", "PREPARED")]


def test_describe_needs_the_group_of_an_id_two_groups_use(warehouse: str) -> None:
    with pytest.raises(inventory.AmbiguousTransactionError, match="billing, orders"):
        inventory.describe(warehouse, "same")
    orders = inventory.describe(warehouse, "same", "orders")
    assert orders is not None and orders.state.state == "PREPARED"
    # Billing's op and outcome are billing's history, not orders'.
    assert not [e for e in orders.history if e.table != half_messages.TABLE.name]
    billing = inventory.describe(warehouse, "same", "billing")
    assert billing is not None and billing.state.state == "ROLLED_BACK"
    assert {e.table for e in billing.history} == {
        half_messages.TABLE.name, op_records.TABLE.name, transactions.TABLE.name,
    }  # fmt: skip
    assert inventory.describe(warehouse, "same", "shipping") is None


def test_operator_commands_refuse_an_ambiguous_id_before_sending(warehouse: str) -> None:
    runner = CliRunner()
    # No broker here: a refusal must come before anything is sent.
    options = ["--warehouse", warehouse, "--bootstrap-servers", "127.0.0.1:1", "--reason", "x"]
    done = runner.invoke(transactions_command, ["commit", "same", *options])
    assert done.exit_code == 1, done.output
    assert "used by producer groups billing, orders: name one with --group" in done.output
    described = runner.invoke(
        transactions_command, ["describe", "same", "--warehouse", warehouse, "--group", "billing"]
    )
    assert described.exit_code == 0, described.output
    assert "ROLLED_BACK" in described.output and "group        billing" in described.output
