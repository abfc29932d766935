"""How `make test` hands the modules to its workers: whole modules, and a few modules as one.

xdist's `--dist loadfile` makes each module a unit of work (a module's shared engine stays in
one process). This scheduler does the same, except that the modules of one SHARED_UNITS entry
are one unit, run one after another by one worker: they start the same heavy processes, and
side by side they starve each other. Measured with three workers (the three longest modules
start together): the cluster-profile test and the cluster fault test, each starting three
brokers, a Spark master with two workers, an S3 API and the coordinator, ran at once; the
coordinator's start on the standalone cluster took 137 s where it takes 48-69 s beside other
work, close to the start bound (180 s, tests/guarantees/app_runs.py), a hang signal that a
slower host would have crossed.

The order of the units is the collection's (tests/conftest.py puts the longest first); a
unit's place is its first module's.
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


def unit_of(nodeid: str) -> str:
    """Return the unit of work a test belongs to: its module, or its SHARED_UNITS name."""
    module = module_of(nodeid)
    return SHARED_UNITS.get(module, module)


class ModuleScheduling(LoadFileScheduling):  # type: ignore[misc]
    """`--dist loadfile`, with SHARED_UNITS' modules as one unit each."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)


def make_scheduler(config: Any, log: Any) -> ModuleScheduling | None:
    """Return the scheduler for `--dist loadfile` (the one `make test` uses), else None
    (xdist's own for any other mode)."""
    if config.getvalue("dist") != "loadfile":
        return None
    return ModuleScheduling(config, log)
