"""What the warehouse says about transactions, for operators: list, find hanging, describe.

Read with `deltalake` (no JVM, answers in a second). The state of each transaction is decided
by the same rules as the REST ingress's GET /v1/transactions/{id}
(`delta_tables/lookup.py` `TransactionLookup`), fed here from whole tables loaded once
instead of one transaction at a time. The tables say what the coordinator has *written*: an
op landed in the last second or two may not be applied yet.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from coordinator.core.errors import TxcoordError
from coordinator.core.state_machine import TransactionState as State
from delta_tables import (
    check_requests,
    half_messages,
    op_records,
    op_verdicts,
    topics,
    transactions,
)
from delta_tables.lookup import TransactionLookup, TransactionState, delta_uri

Row = dict[str, Any]
#: States in which nothing has decided the transaction yet.
OPEN_STATES = tuple(state.name for state in State if not state.is_final)

#: The columns each table contributes (the body is never needed here).
_COLUMNS = {
    half_messages.TABLE.name: [
        "kind", "transaction_id", "msg_id", "producer_group", "topic", "queue_id", "stored_at",
    ],
    transactions.TABLE.name: [
        "transaction_id", "msg_id", "producer_group", "topic", "queue_id", "prepared_at",
        "state", "reason", "check_count", "resolved_at", "batch_id",
    ],
    check_requests.TABLE.name: [
        "transaction_id", "msg_id", "producer_group", "topic", "queue_id", "prepared_at",
        "check_number", "requested_at",
    ],
}  # fmt: skip
#: The columns `history` reads: never a producer's born_at (a timestamp a reader may not be
#: able to hold, should one have landed before the ingest refused them) nor a body.
_HISTORY_COLUMNS = {
    half_messages.TABLE.name: [
        "kind",
        "msg_id",
        "topic",
        "queue_id",
        "producer_group",
        "stored_at",
    ],
    op_records.TABLE.name: [
        "op",
        "op_id",
        "producer_group",
        "from_check",
        "operator",
        "reason",
        "stored_at",
    ],
    check_requests.TABLE.name: ["check_number", "requested_at"],
    op_verdicts.TABLE.name: ["op", "op_id", "verdict", "detail", "recorded_at"],
    transactions.TABLE.name: ["state", "reason", "check_count", "resolved_at"],
    "topics": ["topic", "queue_id", "queue_offset", "delivered_at"],
}


def read_table(
    warehouse: str,
    name: str,
    columns: Sequence[str] | None = None,
    transaction_id: str | None = None,
) -> list[Row]:
    """Return the rows of table `name` (of one transaction, if given); [] if it does not exist."""
    try:
        table = DeltaTable(delta_uri(warehouse, name))
    except TableNotFoundError:
        return []
    filters = [("transaction_id", "=", transaction_id)] if transaction_id is not None else None
    rows: list[Row] = table.to_pyarrow_table(
        columns=list(columns) if columns else None, filters=filters
    ).to_pylist()
    return rows


class _Loaded:
    """Whole tables grouped by transaction id, read like `TransactionLookup` expects."""

    def __init__(self, warehouse: str) -> None:
        self.rows: dict[str, dict[str, list[Row]]] = {}
        for name, columns in _COLUMNS.items():
            grouped: dict[str, list[Row]] = defaultdict(list)
            for row in read_table(warehouse, name, columns):
                if row["transaction_id"] is not None:  # heartbeats have none
                    grouped[row["transaction_id"]].append(row)
            self.rows[name] = grouped

    def __call__(self, name: str, transaction_id: str, columns: Sequence[str]) -> list[Row]:
        return self.rows[name].get(transaction_id, [])

    def transaction_ids(self) -> set[str]:
        return {tx for grouped in self.rows.values() for tx in grouped}


def parse_time(text: str | None) -> datetime | None:
    """Return the instant of an RFC 3339 string from `TransactionState`; None stays None."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def age_seconds(state: TransactionState, now: datetime) -> float:
    """Return how long ago the transaction's half was stored."""
    prepared = parse_time(state.prepared_at)
    return (now - prepared).total_seconds() if prepared else 0.0


def all_transactions(
    warehouse: str,
    states: Sequence[str] = (),
    group: str | None = None,
) -> list[TransactionState]:
    """Return every transaction the tables know, oldest first, filtered by state and group.

    A transaction is (producer group, transaction id) (contract 3): one id used by two groups is
    two transactions, listed apart.
    """
    loaded = _Loaded(warehouse)
    lookup = TransactionLookup(loaded)
    found = []
    for transaction_id in loaded.transaction_ids():
        groups = lookup.producer_groups(transaction_id)
        for producer_group in sorted(groups if group is None else groups & {group}):
            state = lookup.state(transaction_id, producer_group)
            if state is None or (states and state.state not in states):
                continue
            found.append(state)
    return sorted(found, key=lambda s: (s.prepared_at or "", s.transaction_id))


def hanging(
    warehouse: str, older_than_s: float, group: str | None = None, now: datetime | None = None
) -> list[TransactionState]:
    """Return the undecided transactions (PREPARED, CHECKING) older than `older_than_s`."""
    moment = now or datetime.now(UTC)
    return [
        state
        for state in all_transactions(warehouse, OPEN_STATES, group)
        if age_seconds(state, moment) >= older_than_s
    ]


@dataclass(frozen=True)
class Event:
    """One line of a transaction's history."""

    at: datetime
    table: str
    what: str


@dataclass(frozen=True)
class Description:
    """A transaction's state and everything the tables recorded about it, in time order."""

    state: TransactionState
    history: list[Event]


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def history(warehouse: str, state: TransactionState) -> list[Event]:
    """Return the rows of every table about one transaction, as events in time order.

    Only the rows of the transaction's own producer group: another group's transaction with
    the same id is another transaction.
    """
    tx, group = state.transaction_id, state.producer_group
    events: list[Event] = []

    def read(name: str, columns: list[str]) -> list[Row]:
        rows = read_table(warehouse, name, [*columns, "producer_group"], tx)
        return [row for row in rows if row["producer_group"] == group]

    def add(at: datetime | None, table: str, what: str) -> None:
        if at is not None:
            events.append(Event(_utc(at), table, what))

    for row in read(half_messages.TABLE.name, _HISTORY_COLUMNS[half_messages.TABLE.name]):
        if row["kind"] == half_messages.KIND_HALF:
            add(
                row["stored_at"],
                half_messages.TABLE.name,
                f"half {row['msg_id']} for {row['topic']}/{row['queue_id']} "
                f"from group {row['producer_group']}",
            )
    for row in read(op_records.TABLE.name, _HISTORY_COLUMNS[op_records.TABLE.name]):
        who = (
            f" by operator {row['operator']} ({row['reason'] or 'no reason'})"
            if row["operator"]
            else ""
        )
        answer = " answering a check" if row["from_check"] else ""
        what = f"{row['op']} {row['op_id']} from group {row['producer_group']}{answer}{who}"
        add(row["stored_at"], op_records.TABLE.name, what)
    for row in read(check_requests.TABLE.name, _HISTORY_COLUMNS[check_requests.TABLE.name]):
        add(row["requested_at"], check_requests.TABLE.name, f"check #{row['check_number']} sent")
    for row in read(op_verdicts.TABLE.name, _HISTORY_COLUMNS[op_verdicts.TABLE.name]):
        detail = f": {row['detail']}" if row["detail"] else ""
        add(
            row["recorded_at"],
            op_verdicts.TABLE.name,
            f"{row['op']} {row['op_id']} judged {row['verdict']}{detail}",
        )
    for row in read(transactions.TABLE.name, _HISTORY_COLUMNS[transactions.TABLE.name]):
        add(
            row["resolved_at"],
            transactions.TABLE.name,
            f"{row['state']} (reason {row['reason']}, {row['check_count']} check(s))",
        )
    if state.topic:
        name = topics.table(state.topic).name
        for row in read(name, _HISTORY_COLUMNS["topics"]):
            where = f"{row['topic']}/{row['queue_id']} at offset {row['queue_offset']}"
            add(row["delivered_at"], name, f"delivered to {where}")
    return sorted(events, key=lambda e: e.at)


class AmbiguousTransactionError(TxcoordError):
    """A transaction id that several producer groups use, asked for without a group."""


def describe(
    warehouse: str, transaction_id: str, producer_group: str | None = None
) -> Description | None:
    """Return one transaction's state and history, or None when no table knows it.

    Without `producer_group`, the id must belong to one group only; otherwise
    AmbiguousTransactionError names the groups to choose from.
    """

    def read(name: str, tx: str, columns: Sequence[str]) -> list[Row]:
        return read_table(warehouse, name, columns, tx)

    lookup = TransactionLookup(read)
    if producer_group is None:
        groups = lookup.producer_groups(transaction_id)
        if len(groups) > 1:
            raise AmbiguousTransactionError(
                f"transaction id {transaction_id!r} is used by producer groups "
                f"{', '.join(sorted(groups))}: name one with --group"
            )
    state = lookup.state(transaction_id, producer_group)
    if state is None:
        return None
    return Description(state, history(warehouse, state))


def verdict_of(warehouse: str, transaction_id: str, op_id: str) -> Row | None:
    """Return the verdict recorded for op `op_id`, or None while it is not judged yet."""
    for row in read_table(warehouse, op_verdicts.TABLE.name, None, transaction_id):
        if row["op_id"] == op_id:
            return row
    return None
