"""CPU seconds and peak RSS of each process of the run, from /proc (Linux).

Processes, found by their relation to the benchmark's own process:

    kafka broker      the broker's JVM (its pid is known)
    spark JVM         the java child of this process (pyspark's gateway)
    python workers    the Python processes under the Spark JVM (pyspark.daemon and its
                      workers: the ingest's Arrow conversions; the stage runs in the JVM)
    bench process     this process: the coordinator's Python driver (foreachBatch), the REST
                      ingress, the RocketMQ gRPC endpoint, the ticker, and the benchmark's own
                      bookkeeping
    load processes    the Python children of this process that send load (and the peer's
                      producers): live ones from /proc, finished ones from this process's
                      reaped-children time (the Java peer's JVMs and the gRPC path's Java load
                      too, once reaped)
    other processes   everything else on the machine: /proc/stat's busy time minus the above

CPU time is utime + stime (+ the children they reaped, for the workers: pyspark.daemon
reaps its forked workers). Peak RSS is VmHWM (the kernel's high-water mark over the
process's life) for single processes and the sampled peak of the summed VmRSS for the
workers. A `Sampler` thread samples once a second, so a worker that lived less than a
second between samples is missed by the RSS peak (its CPU is still counted once reaped).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Usage:
    """One process's (or a group's) counters at one moment."""

    cpu_seconds: float
    rss_bytes: int
    hwm_bytes: int


def _stat(pid: int) -> tuple[int, float, float] | None:
    """Return (parent pid, own CPU s, reaped children's CPU s) of `pid`, None if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # Fields after the command: state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
    own = (int(fields[11]) + int(fields[12])) / _TICKS
    children = (int(fields[13]) + int(fields[14])) / _TICKS
    return int(fields[1]), own, children


def memory(pid: int | str = "self") -> tuple[int, int]:
    """Return (VmRSS, VmHWM) in bytes; zeros when the process is gone.

    VmHWM is the peak of the process's current memory map, which starts afresh at exec.
    Not `ru_maxrss`: Linux carries the parent's peak across fork and exec into it (and into
    wait4's), so a small child of a big process would report the big one's peak.
    """
    values = {"VmRSS": 0, "VmHWM": 0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, rest = line.partition(":")  # "VmRSS:\t  123456 kB"
            if name in values:
                values[name] = int(rest.split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return values["VmRSS"], values["VmHWM"]


def machine_busy_seconds() -> float:
    """Return the CPU seconds every core spent busy since boot (/proc/stat, not idle/iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    guest = sum(fields[8:10]) if len(fields) > 9 else 0  # already inside user and nice
    return (sum(fields) - idle - guest) / _TICKS


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _children() -> dict[int, list[int]]:
    """Return parent pid -> child pids, for every process visible now."""
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) is not None:
            tree.setdefault(stat[0], []).append(int(entry.name))
    return tree


def _descendants(root: int, tree: dict[int, list[int]]) -> list[int]:
    found, todo = [], list(tree.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += tree.get(pid, [])
    return found


#: The main class on the command line of pyspark's JVM.
SPARK_SUBMIT = "org.apache.spark.deploy.SparkSubmit"


def spark_jvm_pid(parent: int | None = None) -> int | None:
    """Return the pid of pyspark's JVM (SparkSubmit) started by `parent` (default: us)."""
    parent = parent or os.getpid()
    for pid in _children().get(parent, []):
        if SPARK_SUBMIT in _cmdline(pid):
            return pid
    return None


def spark_jvm_pids() -> list[int]:
    """Return the pids of every pyspark JVM (SparkSubmit) on the machine, whoever started it."""
    return [
        int(entry.name)
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and SPARK_SUBMIT in _cmdline(int(entry.name))
    ]


def _python(pid: int) -> bool:
    return any("python" in part for part in _cmdline(pid)[:1])


#: Names of the groups `Processes.usage` reports.
BROKER, SPARK, BENCH = "kafka broker (JVM)", "spark (JVM)", "bench process (driver, REST)"
WORKERS, LOAD, MACHINE = "python workers", "load processes", "machine (every process)"
#: The machine's busy time outside the run: MACHINE less every process above.
OTHER = "other processes (not this run)"


class Processes:
    """The named processes of a run; `usage()` reads them all."""

    def __init__(self, broker_pid: int | None) -> None:
        self.broker_pid = broker_pid
        self.own_pid = os.getpid()
        self.spark_pid = spark_jvm_pid(self.own_pid)

    def usage(self) -> dict[str, Usage]:
        """Return the counters of every named group, now (MACHINE: every process, CPU only)."""
        found: dict[str, Usage] = {MACHINE: Usage(round(machine_busy_seconds(), 2), 0, 0)}
        for name, pid in (
            (BROKER, self.broker_pid),
            (SPARK, self.spark_pid),
            (BENCH, self.own_pid),
        ):
            if pid is None or (stat := _stat(pid)) is None:
                continue
            rss, hwm = memory(pid)
            found[name] = Usage(round(stat[1], 2), rss, hwm)
        tree = _children()
        if self.spark_pid is not None:
            workers = [pid for pid in _descendants(self.spark_pid, tree) if _python(pid)]
            found[WORKERS] = _group(workers)
        own = _stat(self.own_pid)
        load = _group([pid for pid in tree.get(self.own_pid, []) if _python(pid)])
        reaped = own[2] if own is not None else 0.0
        found[LOAD] = Usage(round(load.cpu_seconds + reaped, 2), load.rss_bytes, load.hwm_bytes)
        return found


def _group(pids: list[int]) -> Usage:
    """Return the summed CPU (own + reaped children) and RSS of `pids`, and their top VmHWM."""
    cpu, rss, hwm = 0.0, 0, 0
    for pid in pids:
        stat = _stat(pid)
        if stat is not None:
            cpu += stat[1] + stat[2]
            now, high = memory(pid)
            rss, hwm = rss + now, max(hwm, high)
    return Usage(round(cpu, 2), rss, hwm)


class Sampler:
    """A thread that samples `Processes` each second, keeping each one's peak RSS."""

    def __init__(self, processes: Processes, interval: float = 1.0) -> None:
        self.processes = processes
        self.interval = interval
        self.peak_rss: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-sampler", daemon=True)

    def start(self) -> Sampler:
        """Start sampling."""
        self._thread.start()
        return self

    def sample(self) -> dict[str, Usage]:
        """Read every process now and update the peaks; return the reading."""
        now = self.processes.usage()
        for name, usage in now.items():
            if name == MACHINE:
                continue
            # A group's peak is its sampled summed RSS; a single process also has VmHWM.
            single = name in (BROKER, SPARK, BENCH)
            peak = max(usage.rss_bytes, usage.hwm_bytes if single else 0)
            self.peak_rss[name] = max(self.peak_rss.get(name, 0), peak)
        return now

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def stop(self) -> None:
        """Stop sampling."""
        self._stop.set()
        self._thread.join(5)


def cpu_between(
    before: dict[str, Usage], after: dict[str, Usage], seconds: float
) -> dict[str, dict[str, Any]]:
    """Return per process: CPU seconds used between two readings and the cores that means."""
    used = {}
    for name, end in after.items():
        start = before.get(name)
        used[name] = max(end.cpu_seconds - (start.cpu_seconds if start else 0.0), 0.0)
    if MACHINE in used:
        ours = sum(cpu for name, cpu in used.items() if name != MACHINE)
        used[OTHER] = max(used.pop(MACHINE) - ours, 0.0)
    return {
        name: {
            "cpu_seconds": round(cpu, 2),
            "cores": round(cpu / seconds, 2) if seconds > 0 else None,
        }
        for name, cpu in used.items()
    }
