"""Failpoints: named places where a crash test freezes the process, then kills it with -9.

A crash at a random moment rarely lands between two writes of one micro-batch, which is
where exactly-once is decided. The writers therefore name those places::

    failpoint("coordinator.after_topic_append")

and do nothing there unless armed: the application's entry point passes its (hidden)
`--failpoint name=N` options to `arm`, as `name=N` pairs separated by commas. The N-th
time the process passes `name`, it prints ``FAILPOINT <name> reached`` on standard output
and stops moving (it sleeps, holding whatever it holds). The test that armed
it waits for that line and sends SIGKILL to the process group, so the process dies exactly
there, as a `kill -9` from outside. Unarmed, a failpoint costs one dictionary lookup.

Several failpoints armed together freeze in the order given: a later one counts its passes
only once every earlier one has frozen. The crash test arms one per start: the coordinator
query writes its tables from one thread per table, so two failpoints of one batch could
freeze in either order.
"""

from __future__ import annotations

import sys
import threading
from collections import Counter

from coordinator.core.errors import ConfigurationError

OPTION = "--failpoint"
REACHED = "FAILPOINT {name} reached"


class _Registry:
    """Which failpoints are armed (read from the environment once) and how often passed."""

    def __init__(self) -> None:
        self.armed: dict[str, int] = {}
        self.passed: Counter[str] = Counter()
        self.frozen: set[str] = set()
        self.lock = threading.Lock()


_registry = _Registry()


def parse(spec: str) -> dict[str, int]:
    """Return the failpoints of a `name=N,...` specification."""
    armed: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, sep, count = item.partition("=")
        if not sep or not count.strip().isdigit() or int(count) < 1:
            raise ConfigurationError(f"{OPTION}: expected name=N with N >= 1, not {item!r}")
        armed[name.strip()] = int(count)
    return armed


def arm(spec: str) -> None:
    """Arm the failpoints of a `name=N,...` specification (from the --failpoint options)."""
    _registry.armed = parse(spec)
    _registry.passed.clear()
    _registry.frozen.clear()


def frozen() -> bool:
    """Return True once a failpoint has frozen its thread (the process waits for its kill)."""
    with _registry.lock:
        return bool(_registry.frozen)


def failpoint(name: str) -> None:
    """Freeze here if `name` is armed and this is the armed pass; otherwise return."""
    if name not in _registry.armed:
        return
    with _registry.lock:
        earlier = list(_registry.armed).index(name)
        if any(other not in _registry.frozen for other in list(_registry.armed)[:earlier]):
            return  # not counted until the failpoints armed before it have frozen
        _registry.passed[name] += 1
        if _registry.passed[name] != _registry.armed[name]:
            return
        _registry.frozen.add(name)
    print(REACHED.format(name=name), file=sys.stdout, flush=True)
    threading.Event().wait()  # until the test's SIGKILL
