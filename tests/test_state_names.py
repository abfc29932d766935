"""State and op names are the state machine's own, never spelt out again (one fact, one place).

`coordinator/core/state_machine.py` owns the names of the states (PREPARED … DISCARDED) and
of the ops (COMMIT, ROLLBACK, UNKNOWN, RESUME). Everywhere else the product derives them
(`TransactionState.COMMITTED.name`, `Event.COMMIT.value`), so a renamed or added state
cannot leave a stale copy behind. This test reads every string literal of the product and
fails on one that restates a name, outside the places that must spell one out:

- a `Literal[...]` type (a type checker needs the letters): each has a test of its own that
  it agrees with the state machine (`get_args` in tests/coordinator/rest/test_lookup.py and
  tests/coordinator/protocol/test_check_record.py);
- the SDK's `LocalTransactionState`, RocketMQ's own enum, whose UNKNOWN is its own name.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

from coordinator.core.state_machine import PRODUCER_OPS, Event, TransactionState

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("coordinator", "streams", "delta_tables")
OWNER = Path("coordinator/core/state_machine.py")
#: Lines that must spell a name out (see the docstring), by file: a marker the line holds.
SPELT_OUT = {
    Path("coordinator/sdk/state.py"): "UNKNOW",  # LocalTransactionState.UNKNOWN (and UNKNOW)
}
NAMES = {state.name for state in TransactionState} | {
    event.value for event in (*PRODUCER_OPS, Event.RESUME)
}


def restated_names(path: Path, text: str) -> list[str]:
    """Return `file:line: name` for each string literal of `text` that is a state or op name
    outside a line allowed to spell one out."""
    found = []
    lines = text.splitlines()
    marker = SPELT_OUT.get(path)
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type != tokenize.STRING:
            continue
        try:
            value = ast.literal_eval(token.string)
        except (ValueError, SyntaxError):  # an f-string part: no name spelt whole
            continue
        line = lines[token.start[0] - 1]
        if value in NAMES and "Literal[" not in line and not (marker and marker in line):
            found.append(f"{path}:{token.start[0]}: {value}")
    return found


def test_no_state_or_op_name_is_restated_outside_the_state_machine() -> None:
    found = []
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            path = file.relative_to(ROOT)
            if path != OWNER:
                found += restated_names(path, file.read_text())
    assert found == [], "derive these from coordinator.core.state_machine:\n" + "\n".join(found)


def test_the_guard_sees_a_restated_name() -> None:
    text = 'DECISIVE = {"COMMITTED", "ROLLED_BACK"}\nOPS = Literal["COMMIT"]\nok = "COMMITTING"\n'
    assert restated_names(Path("x.py"), text) == ["x.py:1: COMMITTED", "x.py:1: ROLLED_BACK"]
