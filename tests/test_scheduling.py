"""The workers' units of work (tests/scheduling.py): whole modules, SHARED_UNITS' as one."""

from __future__ import annotations

from collections import defaultdict

from coordinator.runtime.artifacts import PROJECT_ROOT
from tests.scheduling import SHARED_UNITS, unit_of


def test_a_test_s_unit_is_its_module() -> None:
    assert unit_of("tests/test_budget.py::test_x") == "tests/test_budget.py"
    assert unit_of("tests/streams/test_a.py::Class::test_y[p]") == "tests/streams/test_a.py"


def test_every_shared_unit_names_existing_modules_that_run_together() -> None:
    # A renamed module would silently leave its unit and run beside the other again.
    members: dict[str, list[str]] = defaultdict(list)
    for module, unit in SHARED_UNITS.items():
        assert (PROJECT_ROOT / module).is_file(), module
        assert unit_of(f"{module}::test_any") == unit
        members[unit].append(module)
    assert members and all(len(modules) >= 2 for modules in members.values()), members
