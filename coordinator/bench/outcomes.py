"""What the coordinator decided for the bench's transactions, read with deltalake (no JVM).

- decisions: the final state of each transaction in `system/transactions` against the state
  its kind expects (a mismatch is a correctness failure, reported, never hidden);
- check timeliness: a first check's `requested_at - prepared_at - transaction_timeout`, from
  `system/check_requests` (prepared_at is the half's store time, the broker's clock;
  requested_at is the coordinator batch that sent the check). contract 7.4 allows up to
  `transaction_timeout + a few seconds` of it in a quiet system;
- later-check timeliness: check n's (n >= 2) lateness after it was due, `requested_at(n-1)
  + transaction_check_interval` (the coordinator bases the next check on when the previous
  one was sent, however late that was), as recorded or as the producer received it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable

from coordinator.bench.visibility import commits_of
from coordinator.bench.workload import kind_of
from coordinator.protocol.deliveries import delta_rs_location
from delta_tables import check_requests, transactions


def _ms(moment: datetime) -> int:
    if moment.tzinfo is None:  # Delta timestamps are UTC instants
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


#: Which transactions a reading is about: those whose id starts with a prefix (the Kafka and
#: REST paths: the bench's ids), or the keys of a mapping from the warehouse's ids to the
#: bench's (the gRPC path: the ids are the Java client's message ids), read as the bench's.
Select = str | Mapping[str, str]


def _rows(location: str, columns: list[str], select: Select) -> list[dict[str, Any]]:
    if not commits_of(location):
        return []
    table = DeltaTable(delta_rs_location(location)).to_pyarrow_table(columns=columns)
    ids = table["transaction_id"]
    if isinstance(select, str):
        return list(table.filter(pc.starts_with(ids, select)).to_pylist())
    rows = table.filter(pc.is_in(ids, value_set=pa.array(list(select), pa.string()))).to_pylist()
    for row in rows:
        row["transaction_id"] = select[row["transaction_id"]]
    return list(rows)


def final_states(warehouse: str, select: Select) -> dict[str, str]:
    """Return transaction id -> its newest final state, of the transactions `select` names."""
    rows = _rows(
        transactions.TABLE.path(warehouse), ["transaction_id", "state", "resolved_at"], select
    )
    rows.sort(key=lambda row: row["resolved_at"])
    return {row["transaction_id"]: row["state"] for row in rows}


def judge(sent: Iterable[str], states: dict[str, str]) -> dict[str, Any]:
    """Return per-kind counts of sent, decided as expected, decided otherwise, undecided."""
    by_kind: dict[str, Counter[str]] = {}
    for transaction_id in sent:
        kind = kind_of(transaction_id)
        name = kind.name if kind else "unknown"
        counts = by_kind.setdefault(name, Counter())
        counts["sent"] += 1
        state = states.get(transaction_id)
        if state is None:
            counts["undecided"] += 1
        elif kind is not None and state == kind.expected_state:
            counts["as_expected"] += 1
        else:
            counts[f"wrong:{state}"] += 1
    kinds = {name: dict(counts) for name, counts in sorted(by_kind.items())}
    total = Counter[str]()
    for counts in by_kind.values():
        total.update(counts)
    wrong = sum(n for key, n in total.items() if key.startswith("wrong:"))
    return {
        "sent": total["sent"],
        "decided": total["sent"] - total["undecided"],
        "undecided": total["undecided"],
        "as_expected": total["as_expected"],
        "wrong": wrong,
        "by_kind": kinds,
    }


def _check_rows(warehouse: str, select: Select) -> list[dict[str, Any]]:
    return _rows(
        check_requests.TABLE.path(warehouse),
        ["transaction_id", "check_number", "prepared_at", "requested_at"],
        select,
    )


def first_check_delays_ms(warehouse: str, select: Select, timeout_ms: int) -> list[float]:
    """Return requested_at - prepared_at - timeout (ms) of each first check `select` names."""
    rows = _check_rows(warehouse, select)
    first: dict[str, float] = {}
    for row in rows:
        if row["check_number"] != 1 or row["prepared_at"] is None:
            continue
        delay = _ms(row["requested_at"]) - _ms(row["prepared_at"]) - timeout_ms
        first[row["transaction_id"]] = min(delay, first.get(row["transaction_id"], delay))
    return list(first.values())


def requested_at_ms(warehouse: str, select: Select) -> dict[tuple[str, int], int]:
    """Return (transaction id, check number) -> requested_at (ms) of the checks `select` names.

    A check recorded twice (a replayed batch) keeps its earlier time.
    """
    requested: dict[tuple[str, int], int] = {}
    for row in _check_rows(warehouse, select):
        key = (row["transaction_id"], int(row["check_number"]))
        at = _ms(row["requested_at"])
        requested[key] = min(at, requested.get(key, at))
    return requested


def prepared_at_ms(warehouse: str, select: Select) -> dict[str, int]:
    """Return transaction id -> its half's store time (ms), as its first check recorded it."""
    return {
        row["transaction_id"]: _ms(row["prepared_at"])
        for row in _check_rows(warehouse, select)
        if row["check_number"] == 1 and row["prepared_at"] is not None
    }


def later_check_delays_ms(
    arrivals: Mapping[tuple[str, int], int],
    requested: Mapping[tuple[str, int], int],
    interval_ms: int,
) -> list[float]:
    """Return, for each check n >= 2, `arrivals[n] - requested[n-1] - interval_ms` (pure).

    Check n is due `interval_ms` after check n-1 was requested; `arrivals` says when check n
    happened (its own requested_at, or when the producer received it). A check whose previous
    one is unknown is skipped.
    """
    delays: list[float] = []
    for (transaction_id, number), at in arrivals.items():
        previous = requested.get((transaction_id, number - 1))
        if number >= 2 and previous is not None:
            delays.append(float(at - previous - interval_ms))
    return delays
