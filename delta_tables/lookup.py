"""A transaction's state, read from the warehouse's Delta tables with `deltalake` (no JVM).

The newest row of `system/transactions` is the final state (COMMITTED, ROLLED_BACK,
DISCARDED). A DISCARDED transaction that check requests newer than its discard follow was
resumed by an operator (RocketMQ's resumeCheckHalfMessage): it is CHECKING again, its count
restarted. Without a final row, check requests make it CHECKING (count = the highest check
number) and a half in `system/half_messages` makes it PREPARED. A table that does not exist
yet (nothing has run) reads as empty, so an unknown transaction is a 404, never an error.
The REST ingress (GET /v1/transactions/{id}) and the operator commands (coordinator/admin)
both read through it, so it lives here, below both.

A transaction is identified by (producer group, transaction id) (contract 3): given a group,
only that group's rows are read, so another group's transaction with the same id is as
invisible as one that does not exist. Without a group (an admin's question, or the admin
commands' inventory) every row of the id counts, as before the pair was the key;
`producer_groups` says whether that question has one answer.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from deltalake import DeltaTable
from pyarrow.parquet import filters_to_expression
from pydantic import BaseModel, Field

from coordinator.core import state_machine
from coordinator.core.state_machine import Event
from coordinator.core.state_machine import TransactionState as State
from coordinator.protocol.deliveries import delta_rs_location
from delta_tables import check_requests, half_messages, transactions
from delta_tables.snapshots import TableSnapshots

log = logging.getLogger("txcoord.rest.lookup")

#: coordinator.core.state_machine.TransactionState's names as a type
#: (tests/coordinator/rest/test_lookup.py).
STATES = Literal["PREPARED", "CHECKING", "COMMITTED", "ROLLED_BACK", "DISCARDED"]
Row = dict[str, Any]
#: What the lookup needs: (table name, transaction id, columns) -> matching rows.
RowReader = Callable[[str, str, Sequence[str]], list[Row]]


class TransactionState(BaseModel):
    """Where a transaction is, as the Delta tables say (GET /v1/transactions/{id})."""

    transaction_id: str
    producer_group: str | None
    topic: str | None
    queue_id: int | None
    msg_id: str | None
    state: STATES
    check_count: int
    prepared_at: str | None
    resolved_at: str | None = Field(description="null unless the state is final")
    reason: str | None = Field(description="null unless the state is final")


def delta_uri(warehouse: str, name: str) -> str:
    """Return the location of table `name` for deltalake (`s3a://` is Hadoop's name for s3)."""
    return delta_rs_location(f"{warehouse.rstrip('/')}/{name}")


def iso(moment: datetime | None) -> str | None:
    """Return a timestamp as RFC 3339 UTC with milliseconds; None stays None."""
    if moment is None:
        return None
    if moment.tzinfo is None:  # Delta timestamps are UTC instants
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class DeltaRows:
    """Read the rows of one transaction from the warehouse's tables; thread-safe.

    Each table is brought up to date by one reader at a time, and read by all at once
    (snapshots.py): no lock is held while the warehouse is read, so a flood of lookups on a
    slow warehouse does not queue every other lookup behind it. A read still holds every
    commit made before it began.
    """

    def __init__(self, warehouse: str, storage_options: dict[str, str] | None = None) -> None:
        self.warehouse = warehouse
        self.storage_options = storage_options
        self._tables: dict[str, TableSnapshots] = {}
        self._guard = threading.Lock()  # around the dictionary only

    def __call__(self, name: str, transaction_id: str, columns: Sequence[str]) -> list[Row]:
        """Return the rows of table `name` whose transaction_id is `transaction_id`."""
        with self._guard:
            snapshots = self._tables.get(name)
            if snapshots is None:
                snapshots = self._tables[name] = TableSnapshots(
                    functools.partial(
                        DeltaTable,
                        delta_uri(self.warehouse, name),
                        storage_options=self.storage_options,
                    )
                )
        snapshot = snapshots.fresh()
        if snapshot is None:  # not created yet: nothing has run
            return []
        # As DeltaTable.to_pyarrow_table filters: file statistics prune, then rows.
        rows = snapshot.to_table(
            columns=list(columns),
            filter=filters_to_expression([("transaction_id", "=", transaction_id)]),
        )
        result: list[Row] = rows.to_pylist()
        return result


_MESSAGE = ["transaction_id", "msg_id", "producer_group", "topic", "queue_id", "prepared_at"]


_FINAL = [*_MESSAGE, "state", "reason", "check_count", "resolved_at", "batch_id"]
_CHECK = [*_MESSAGE, "check_number", "requested_at"]
_HALF = ["kind", *_MESSAGE[:5], "stored_at"]


class TransactionLookup:
    """Answer GET /v1/transactions/{id} from the Delta tables."""

    def __init__(self, read: RowReader) -> None:
        self.read = read

    def _rows(
        self, table: str, transaction_id: str, columns: list[str], producer_group: str | None
    ) -> list[Row]:
        rows = self.read(table, transaction_id, columns)
        if producer_group is None:
            return rows
        return [row for row in rows if row["producer_group"] == producer_group]

    def producer_groups(self, transaction_id: str) -> set[str]:
        """Return the producer groups that have a transaction `transaction_id`."""
        tables = [
            (transactions.TABLE.name, _FINAL),
            (check_requests.TABLE.name, _CHECK),
            (half_messages.TABLE.name, _HALF),
        ]
        return {
            row["producer_group"]
            for table, columns in tables
            for row in self.read(table, transaction_id, columns)
            if row["producer_group"] is not None
            and (table != half_messages.TABLE.name or row["kind"] == half_messages.KIND_HALF)
        }

    def state(
        self, transaction_id: str, producer_group: str | None = None
    ) -> TransactionState | None:
        """Return the state of `producer_group`'s transaction (any group's when None), or
        None when no table knows it."""
        finals = self._rows(transactions.TABLE.name, transaction_id, _FINAL, producer_group)
        checks = self._rows(check_requests.TABLE.name, transaction_id, _CHECK, producer_group)
        if finals:
            last = max(finals, key=lambda r: (r["resolved_at"], r["batch_id"]))
            resumed = [c for c in checks if c["requested_at"] > last["resolved_at"]]
            if resumed and state_machine.apply(State[last["state"]], Event.RESUME).moved:
                # A check after the end: an operator resumed it (RESUME is the one move out
                # of an end), and it is checking again.
                return self._checking(last, resumed)
            return TransactionState(
                **_message(last),
                state=last["state"],
                check_count=last["check_count"],
                resolved_at=iso(last["resolved_at"]),
                reason=last["reason"],
            )
        if checks:
            return self._checking(checks[0], checks)
        rows = self._rows(half_messages.TABLE.name, transaction_id, _HALF, producer_group)
        halves = [row for row in rows if row["kind"] == half_messages.KIND_HALF]
        if halves:
            first = min(halves, key=lambda r: r["stored_at"])
            return TransactionState(
                **_message({**first, "prepared_at": first["stored_at"]}),
                state=State.PREPARED.name,
                check_count=0,
                resolved_at=None,
                reason=None,
            )
        return None

    @staticmethod
    def _checking(message: Row, checks: list[Row]) -> TransactionState:
        return TransactionState(
            **_message(message),
            state=State.CHECKING.name,
            check_count=max(c["check_number"] for c in checks),
            resolved_at=None,
            reason=None,
        )


def _message(row: Row) -> dict[str, Any]:
    """Return the message fields of a row as the answer's fields."""
    return {
        "transaction_id": row["transaction_id"],
        "producer_group": row["producer_group"],
        "topic": row["topic"],
        "queue_id": row["queue_id"],
        "msg_id": row["msg_id"],
        "prepared_at": iso(row["prepared_at"]),
    }
