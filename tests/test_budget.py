"""tests/budget.toml names exactly the modules marked `long`, and the report warns as it says."""

from __future__ import annotations

import re
from pathlib import Path

from tests.gate_budget import Budget, GateClock

ROOT = Path(__file__).resolve().parents[1]
LONG = re.compile(r"pytest\.mark\.long\b")


def test_every_long_module_has_a_budget_and_every_budget_a_long_module() -> None:
    budget = Budget.load()
    marked = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if LONG.search(path.read_text())
    }
    assert sorted(marked - set(budget.modules)) == [], "long modules without a budget"
    assert sorted(set(budget.modules) - marked) == [], "budgets of no long module"
    assert all(minutes > 0 for minutes in budget.modules.values())


def test_a_module_over_its_budget_and_a_long_run_are_warned_of() -> None:
    clock = GateClock(Budget({"tests/a.py": 2.0, "tests/b.py": 2.0}, whole_minutes=35))
    clock.seconds.update({"tests/a.py": 2.9 * 60, "tests/b.py": 3.1 * 60, "tests/c.py": 50.0})
    warnings = [line for line in clock.report(36 * 60) if line.startswith("WARNING")]
    assert len(warnings) == 3, warnings
    assert "tests/b.py took 3.1 min" in warnings[0]
    assert "tests/c.py took 0.8 min" in warnings[1]  # not a long module: half a minute
    assert "took 36.0 min" in warnings[2]
    assert [line for line in clock.report(34 * 60) if "the tests took" in line] == []
