"""CPU per transaction, and the same figure counted in a fixed piece of work on the same host.

A path's cost is the CPU seconds every process of the run used during its phase (the broker,
the Spark JVM, the driver and the load; not the rest of the machine), divided by the
transactions the phase decided: the figure of the contract's CPU target (8).

Milliseconds of CPU are the machine's: two hosts of the same "2 cores" differ by a factor of
two in what a millisecond buys (docs/performance.md). The Java peer of the same run is a
fixed piece of work whose code is not ours (Kafka's `ProducerPerformance`, transactional, the
short shape), so its CPU per record measures the machine: within ±4% from run to run on
each of two hosts, while our milliseconds varied by ±15%. `in_java_records` is our CPU per
transaction in units of that: how many of the peer's records the same CPU would have sent.
It moves when the engine does, not when the host does.
"""

from __future__ import annotations

from typing import Any

from coordinator.bench.resources import OTHER

__all__ = ["cpu_per_transaction"]


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def cpu_per_transaction(result: dict[str, Any]) -> dict[str, Any]:
    """Return, per path, the CPU its phase used per decided transaction.

    Keys per path: `ms` (all the run's processes), `by_process` (ms each), and, when the
    Java peer ran, `java_short_us_per_record` (its CPU per record) and `in_java_records`
    (`ms` in units of it). Empty when the run measured no resources.
    """
    phases = ((result.get("resources") or {}).get("phases")) or {}
    java = (((result.get("java_peer") or {}).get("shapes")) or {}).get("short") or {}
    java_us = (
        1e6 * java["cpu_seconds"] / java["records"]
        if java.get("records") and java.get("cpu_seconds")
        else None
    )
    found: dict[str, Any] = {}
    for path, numbers in (result.get("paths") or {}).items():
        phase = phases.get(f"{path} path")
        decided = numbers["transactions"].get("decided") or 0
        if phase is None or decided <= 0:
            continue
        by_process = {
            name: 1000 * used["cpu_seconds"] / decided
            for name, used in phase["processes"].items()
            if name != OTHER and used.get("cpu_seconds") is not None
        }
        ms = sum(by_process.values())
        found[path] = {
            "ms": round(ms, 3),
            "by_process": {name: round(value, 3) for name, value in by_process.items()},
            "java_short_us_per_record": _round(java_us, 1),
            "in_java_records": _round(1000 * ms / java_us if java_us else None, 2),
        }
    return found
