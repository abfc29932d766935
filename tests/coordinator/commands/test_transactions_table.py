"""`txcoord transactions list`'s table prints what the warehouse holds, never as markup.

A transaction id is any text a producer chose (contract 3): `[/x]` made rich raise
MarkupError, and `[link=...]` rendered a hyperlink in the operator's terminal.
"""

from __future__ import annotations

import pytest

from coordinator.commands.transactions import _emit
from delta_tables.lookup import TransactionState

IDS = ["[/x]", "[link=https://e.example]pay[/link]", "[bold red]tx[/]", "plain"]


def state(transaction_id: str) -> TransactionState:
    return TransactionState(
        transaction_id=transaction_id,
        producer_group="[g]",
        topic="OrderPaid",
        queue_id=1,
        msg_id="m",
        state="DISCARDED",
        check_count=2,
        prepared_at="2026-11-28T00:00:00Z",
        resolved_at="2026-11-28T00:01:00Z",
        reason="[/reason]",
    )


def test_ids_and_reasons_print_as_written(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("NO_COLOR", "1")
    _emit([state(i) for i in IDS], as_json=False, title="transactions")
    printed = capsys.readouterr().out
    for written in [*IDS, "[g]", "[/reason]"]:
        assert written in printed, printed
    assert "\x1b]8;" not in printed  # no terminal hyperlink
