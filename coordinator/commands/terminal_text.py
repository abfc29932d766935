"""Text from Kafka or the warehouse, made safe to print on an operator's terminal.

Member names, group and topic names, and reasons come from clients: a name holding ESC
sequences could clear the screen, retitle the window or set the clipboard (OSC 52) of the
operator who lists them. Every control character (C0, DEL, C1) is shown escaped instead.
"""

from __future__ import annotations

import re

from rich.text import Text

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(value: str) -> str:
    """Return `value` with every control character written as an escape (\\x1b, \\n, ...)."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], value)


def cell(value: str) -> Text:
    """Return a table cell of `value`: escaped, and never read as rich markup."""
    return Text(printable(value))
