"""How `make test` hands the modules to its workers: whole modules, a few modules as one, and
never more than two of the heaviest at once.

xdist's `--dist loadfile` makes each module a unit of work (a module's shared engine stays in
one process). This scheduler does the same, with two changes:

- the modules of one SHARED_UNITS entry are one unit, run one after another by one worker:
  they start the same heavy processes, and side by side they starve each other. Measured
  with three workers (the three longest modules start together): the cluster-profile test
  and the cluster fault test, each starting three brokers, a Spark master with two workers,
  an S3 API and the coordinator, ran at once; the coordinator's start on the standalone
  cluster took 137 s where it takes 48-69 s beside other work, close to the start bound
  (180 s, tests/guarantees/app_runs.py), a hang signal that a slower host would have crossed;
- at most MAX_HEAVY of the HEAVY units run at once: a worker that would start a third takes
  the next other unit of the queue instead. They are the `kill -9` suites, each starting the
  application a dozen times under load against a start bound: with three workers, the third
  runs the short modules beside two of them, never a third (how the bounds were measured).

Why three workers on two cores: with two, the CPU was 90-99 % busy in the test step's first
third but 40-75 % in the rest (sampled every 10 s, an idle clean-clone run of 6e68e85: its
short modules wait on transaction timeouts, check intervals and restarts, both workers at
once); a third fills that wait (docs/testing.md "How long it takes").

The order of the units is the collection's (tests/conftest.py puts the longest first); a
unit's place is its first module's. A worker gets its next unit when it holds one test it
has not run (xdist's own waits until two are left: a unit handed out that early runs after
the current one whatever the other workers do, and the choice above is made before its time).
"""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadFileScheduling

from tests.gate_budget import module_of

#: Modules that run in one worker, one after the other, never beside each other.
SHARED_UNITS: dict[str, str] = {
    "tests/guarantees/test_cluster_faults.py": "cluster profiles",
    "tests/coordinator/runtime/local_stack/test_cluster_profile.py": "cluster profiles",
}
#: The units that start the application again and again under load with `kill -9`.
HEAVY_UNITS = frozenset(
    {
        "tests/guarantees/test_crash_recovery.py",
        "cluster profiles",
        "tests/guarantees/test_rebuild_crash.py",
        "tests/guarantees/test_overlapping_drivers.py",
    }
)
#: How many HEAVY_UNITS run at once, at most (the two-worker gate's figure, where every start
#: bound was measured).
MAX_HEAVY = 2


def unit_of(nodeid: str) -> str:
    """Return the unit of work a test belongs to: its module, or its SHARED_UNITS name."""
    module = module_of(nodeid)
    return SHARED_UNITS.get(module, module)


def next_unit(queue: list[str], heavy_elsewhere: int) -> str:
    """Return the unit of `queue` (in order) a worker takes next, while `heavy_elsewhere`
    HEAVY_UNITS are held by the other workers: the first one, unless that would run one heavy
    unit too many; then the first other one (the first of all if only heavy ones are left)."""
    if heavy_elsewhere < MAX_HEAVY:
        return queue[0]
    return next((unit for unit in queue if unit not in HEAVY_UNITS), queue[0])


class ModuleScheduling(LoadFileScheduling):  # type: ignore[misc]
    """`--dist loadfile`, with SHARED_UNITS' modules as one unit each, at most MAX_HEAVY
    heavy units at once, and a worker's next unit chosen when it holds one test."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _heavy_elsewhere(self, node: Any) -> int:
        """How many other workers hold a heavy unit with tests still to run."""
        return sum(
            any(unit in HEAVY_UNITS and not all(tests.values()) for unit, tests in workload.items())
            for other, workload in self.assigned_work.items()
            if other is not node
        )

    def _assign_work_unit(self, node: Any) -> None:
        unit = next_unit(list(self.workqueue), self._heavy_elsewhere(node))
        self.workqueue.move_to_end(unit, last=False)  # xdist's own takes the first
        super()._assign_work_unit(node)

    def _reschedule(self, node: Any) -> None:
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        # The worker runs a test once it knows the next (for its teardown): one left unrun
        # means it waits for this unit.
        if self._pending_of(self.assigned_work[node]) > 1:
            return
        self._assign_work_unit(node)


def make_scheduler(config: Any, log: Any) -> ModuleScheduling | None:
    """Return the scheduler for `--dist loadfile` (the one `make test` uses), else None
    (xdist's own for any other mode)."""
    if config.getvalue("dist") != "loadfile":
        return None
    return ModuleScheduling(config, log)
