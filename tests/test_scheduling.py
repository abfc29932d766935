"""The workers' units of work (tests/scheduling.py): whole modules, SHARED_UNITS' as one."""

from __future__ import annotations

from collections import defaultdict
from types import SimpleNamespace

from coordinator.runtime.artifacts import PROJECT_ROOT
from tests.scheduling import (
    HEAVY_UNITS,
    MAX_HEAVY,
    SHARED_UNITS,
    ModuleScheduling,
    next_unit,
    unit_of,
)


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


def test_every_heavy_unit_names_existing_modules() -> None:
    shared = set(SHARED_UNITS.values())
    for unit in HEAVY_UNITS:
        assert unit in shared or (PROJECT_ROOT / unit).is_file(), unit


def test_the_next_unit_skips_a_third_heavy_one_for_the_first_other() -> None:
    queue = ["cluster profiles", "tests/guarantees/test_rebuild_crash.py", "tests/a.py"]
    assert next_unit(queue, heavy_elsewhere=MAX_HEAVY - 1) == "cluster profiles"
    assert next_unit(queue, heavy_elsewhere=MAX_HEAVY) == "tests/a.py"
    # Only heavy ones left: the first, rather than a worker with nothing to do.
    assert next_unit(queue[:2], heavy_elsewhere=MAX_HEAVY) == "cluster profiles"


class _Node:
    """A worker as the scheduler sees it: the tests it was sent, in order."""

    def __init__(self, name: str) -> None:
        self.name, self.shutting_down, self.sent = name, False, list[int]()
        self.gateway = SimpleNamespace(id=name)

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.extend(indices)

    def shutdown(self) -> None:
        self.shutting_down = True


def _scheduler(nodes: list[_Node], collection: list[str]) -> ModuleScheduling:
    config = SimpleNamespace(
        option=SimpleNamespace(loadscopereorder=False),
        getvalue=lambda name: {"tx": [f"{len(nodes)}*popen"]}[name],
    )
    scheduler = ModuleScheduling(config)
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    return scheduler


def test_three_workers_run_every_test_once_and_never_three_heavy_units_at_once() -> None:
    heavy = sorted(HEAVY_UNITS - set(SHARED_UNITS.values()))
    modules = [*heavy, *sorted(SHARED_UNITS)] + [f"tests/light_{n}.py" for n in range(12)]
    collection = [f"{module}::test_{n}" for module in modules for n in range(2)]
    nodes = [_Node(f"gw{n}") for n in range(3)]
    scheduler = _scheduler(nodes, collection)
    ran: list[str] = []
    # Each worker runs its tests in order, one at a time, and only once it knows the next
    # (or was told to stop): take turns, checking the heavy units running at each step.
    while any(ran.count(node.name) < len(node.sent) for node in nodes):
        progressed = False
        for node in nodes:
            done = ran.count(node.name)
            if done < len(node.sent) and (done + 1 < len(node.sent) or node.shutting_down):
                running = {
                    unit_of(collection[n.sent[ran.count(n.name)]])
                    for n in nodes
                    if ran.count(n.name) < len(n.sent)
                }
                assert len(running & HEAVY_UNITS) <= MAX_HEAVY, running
                ran.append(node.name)
                scheduler.mark_test_complete(node, node.sent[done])
                progressed = True
        assert progressed, "a worker waits for a next test that never comes"
    sent = sorted(index for node in nodes for index in node.sent)
    assert sent == list(range(len(collection)))  # every test once
    assert all(node.shutting_down for node in nodes)
