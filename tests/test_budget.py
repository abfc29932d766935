"""tests/budget.toml names exactly the modules marked `long`, and the report warns as it says."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

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


def test_the_application_starts_and_unplanned_exits_a_test_recorded_are_reported() -> None:
    clock = GateClock(Budget({}, whole_minutes=35))
    runs = [
        {"start_seconds": 31.5, "master": "local[2]"},
        {"unplanned": "while starting: exit code 1: error: the broker went away"},
        {"start_seconds": 40.0, "master": "local[2]"},
    ]
    for when in ("setup", "call", "teardown"):  # only the teardown's report counts them
        report = SimpleNamespace(
            nodeid="tests/guarantees/test_x.py::test_y", duration=1.0, when=when,
            user_properties=[("app_runs", runs)],
        )  # fmt: skip
        clock.pytest_runtest_logreport(report)  # type: ignore[arg-type]
    lines = clock.report(60)
    assert "application starts on local[2]: 2, median 40.0 s, longest 40.0 s" in lines[-2]
    assert lines[-1] == (
        "unplanned exit in tests/guarantees/test_x.py::test_y: "
        "while starting: exit code 1: error: the broker went away"
    )


def test_every_modules_time_is_saved_longest_first(tmp_path: Path) -> None:
    clock = GateClock(Budget({}, whole_minutes=35))
    for module, seconds in (("tests/a.py", 2.04), ("tests/b.py", 30.0), ("tests/a.py", 1.0)):
        report = SimpleNamespace(
            nodeid=f"{module}::test_z", duration=seconds, when="call", user_properties=[]
        )
        clock.pytest_runtest_logreport(report)  # type: ignore[arg-type]
    clock.save(95.4, tmp_path / "times.json")
    saved = json.loads((tmp_path / "times.json").read_text())
    assert saved == {"wall_seconds": 95, "modules": {"tests/b.py": 30.0, "tests/a.py": 3.0}}
    assert list(saved["modules"]) == ["tests/b.py", "tests/a.py"]
