"""Names from clients cannot drive the operator's terminal (security finding 13)."""

from __future__ import annotations

from io import StringIO

from rich.console import Console
from rich.table import Table

from coordinator.commands.terminal_text import cell, printable

#: Clear the screen, set the clipboard (OSC 52), a C1 CSI, a bell, a newline.
HOSTILE = "m\x1b[2J\x1b]52;c;ZXZpbA==\x07\x9b31m\n"


def test_control_characters_are_escaped() -> None:
    shown = printable(HOSTILE)
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for ch in shown)
    assert shown == "m\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07\\x9b31m\\n"
    assert printable("orders-1 topic/3 -> 7") == "orders-1 topic/3 -> 7"


def test_a_table_of_hostile_names_prints_no_escape_sequence() -> None:
    out = StringIO()
    table = Table()
    table.add_column("member")
    table.add_row(cell(HOSTILE))
    table.add_row(cell("[bold]not markup[/bold]"))
    Console(file=out, color_system=None, width=120).print(table)
    assert "\x1b" not in out.getvalue() and "\x07" not in out.getvalue()
    assert "[bold]not markup[/bold]" in out.getvalue()
