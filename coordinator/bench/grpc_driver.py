"""The gRPC path: RocketMQ's own Java client against the RocketMQ 5 gRPC endpoint (contract 5.6).

The load is a JVM running deploy/jvm/rocketmq-peer/'s `txcoord.peer.RocketMqBench`, compiled by
the install step against rocketmq-client-java from Maven Central: a transactional producer with
its TransactionChecker, as a RocketMQ application writes it, in `senders` threads (the client
sends a transactional message synchronously: beginTransaction, send, then commit or rollback,
or neither for the checked kinds, which its checker decides). It deals the bench's mix in the
same order as the Python loads (the mix's smooth round robin is periodic: one period is passed
on its command line) and keeps the same in-flight window, fed the decision count on its
standard input.

`GrpcLoad` is the parent's handle on it, with the interface `throughput.drive` uses for a
`LoadProcess`; `finish()` returns the same result, plus `ids` (the warehouse's transaction ids,
which are the client's message ids, to the bench's ids, the messages' keys) and the client's own
latencies. The JVM's CPU comes from wait4 (it counts in the run's load processes once reaped).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from coordinator.bench.resources import memory
from coordinator.bench.stats import summarize
from coordinator.bench.workload import KINDS, Mix, kind_of
from coordinator.core.state_machine import Event
from coordinator.runtime.artifacts import jars

MAIN = "txcoord.peer.RocketMqBench"


def cycle(mix: str) -> list[str]:
    """Return one period of the kind codes `Mix.kinds()` deals (pure).

    The smooth weighted round robin returns to its start after sum(weights) / gcd(weights)
    picks (each kind picked weight / gcd times; scaling the weights scales its state and keeps
    its picks), so repeating this period deals exactly what the Python loads deal.
    """
    parsed = Mix.parse(mix)
    weights = [weight for _, weight in parsed.weights]
    period = sum(weights) // math.gcd(*weights)
    return [kind.code for kind in islice(parsed.kinds(), period)]


def kinds_argument() -> str:
    """Return every kind for the Java load: code=name:first op:check answer:deciding check."""
    return ";".join(
        f"{k.code}={k.name}:{k.first_op}:{k.check_answer}:{k.decided_at_check}"
        for k in KINDS.values()
    )


def parse_records(lines: Iterable[str]) -> dict[str, Any]:
    """Return what the Java load's out file says (pure): its transactions and checks.

    Lines: "tx key message_id began_ms half_ms end_ms" (end_ms -1: left to the checker) and
    "check key number at_ms answer". Result: `transactions` [key, kind, half ack, end ack or
    None], `ids` message id -> key, `responder` in the Python responder's shape (`answers`:
    the first deciding answer of each checked transaction, when the checker gave it;
    `first_checks`: key -> [received, None, None], the half's store time filled in later from
    the warehouse; `arrivals`), and the client's latencies: send (beginTransaction to the
    send's answer) and end (commit or rollback call to its answer).
    """
    transactions, ids = [], {}
    sends: list[float] = []
    ends: list[float] = []
    answers: dict[str, list[Any]] = {}
    first_checks: dict[str, list[Any]] = {}
    arrivals: dict[tuple[str, int], int] = {}
    checks = unexpected = 0
    for line in lines:
        fields = line.rstrip("\n").split("\t")
        if fields[0] == "tx":
            key, message_id, began, half, end = fields[1], fields[2], *map(int, fields[3:6])
            kind = kind_of(key)
            transactions.append([key, kind.name if kind else None, half, end if end >= 0 else None])
            ids[message_id] = key
            sends.append(float(half - began))
            if end >= 0:
                ends.append(float(end - half))
        elif fields[0] == "check":
            key, number, at, answer = fields[1], int(fields[2]), int(fields[3]), fields[4]
            checks += 1
            kind = kind_of(key)
            if kind is None or not kind.checked:
                unexpected += 1
            arrivals.setdefault((key, number), at)
            if number == 1:
                first_checks.setdefault(key, [at, None, None])
            if answer != Event.UNKNOWN.value:  # RocketMQ's resolution: the producer's op
                answers.setdefault(key, [answer, at])
    return {
        "transactions": transactions,
        "ids": ids,
        "responder": {
            "answers": answers,
            "first_checks": first_checks,
            "arrivals": [[key, n, at, None] for (key, n), at in arrivals.items()],
            "checks_received": checks,
            "unexpected_checks": unexpected,
        },
        "client_latency_ms": {
            "what": "the Java client's own: beginTransaction to send()'s answer (the half "
            "durable), and commit()/rollback() to its answer (the op durable)",
            "send": summarize(sends),
            "end": summarize(ends),
        },
    }


@dataclass(frozen=True)
class GrpcPlan:
    """What the Java load sends, where, and how fast."""

    endpoint: str  # host:port of the gRPC endpoint
    topic: str
    run: str  # prefix of every transaction id
    mix: str
    out_file: Path
    home: Path  # the JVM's user.home: the client writes its logs under it
    count: int | None = None
    duration: float | None = None
    window: int = 10_000
    rate: float | None = None
    senders: int = 32  # threads, each one transaction at a time (BenchSettings.grpc_senders)
    body_size: int = 100

    def command(self, java: str) -> list[str]:
        """Return the JVM's command line."""
        class_path = os.pathsep.join(
            str(jar) for jar in (*jars("rocketmq-peer"), *jars("rocketmq"))
        )
        size = f"count={self.count}" if self.count is not None else f"duration={self.duration}"
        command = [
            java, "-Xms256m", "-Xmx512m", f"-Duser.home={self.home}", "-cp", class_path, MAIN,
            f"endpoint={self.endpoint}", f"topic={self.topic}", f"run={self.run}",
            f"cycle={','.join(cycle(self.mix))}", f"kinds={kinds_argument()}", size,
            f"window={self.window}", f"rate={self.rate or 0}", f"senders={self.senders}",
            f"body={self.body_size}", f"out={self.out_file}",
        ]  # fmt: skip
        setpriv = shutil.which("setpriv")  # the JVM goes with the bench, even on kill -9
        return [setpriv, "--pdeathsig", "TERM", *command] if setpriv else command


class GrpcLoad:
    """The parent's handle on the Java load (the interface of load.LoadProcess)."""

    def __init__(self, plan: GrpcPlan) -> None:
        self.plan = plan
        self.process: subprocess.Popen[str] | None = None
        self._sent = 0
        self._told = -1
        self._times: dict[str, int] = {}
        self._errors: list[str] = []
        self._ended = threading.Event()  # it sent everything, or ended
        self._peak = 0
        self._reader: threading.Thread | None = None

    def start(self) -> GrpcLoad:
        """Start the JVM."""
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java is not on PATH; the gRPC path needs Java 17 or newer")
        self.plan.home.mkdir(parents=True, exist_ok=True)
        with (self.plan.home / "stderr.txt").open("w") as errors:
            self.process = subprocess.Popen(
                self.plan.command(java),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
            )
        self._reader = threading.Thread(target=self._read, name="bench-grpc-load", daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            if not line.startswith("{"):
                continue
            event = json.loads(line)
            # VmHWM is the JVM's high-water mark: its last reading is its peak.
            self._peak = max(self._peak, memory(self.process.pid)[1])
            if event["event"] in ("progress", "sent"):
                self._sent = event["sent"]
            if event["event"] == "sent":
                self._times = {k: event[k] for k in ("started_ms", "finished_ms")}
                self._ended.set()
            elif event["event"] == "error":
                self._errors.append(event["message"])
        self._ended.set()

    @property
    def pid(self) -> int | None:
        """Return the JVM's pid once started."""
        return None if self.process is None else self.process.pid

    @property
    def sent(self) -> int:
        """Return how many transactions it sent (and ended as their kind says) so far."""
        return self._sent

    def _tell(self, line: str) -> None:
        assert self.process is not None and self.process.stdin is not None
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):  # it ended: alive() and finish() say how
            pass

    def tell_decided(self, decided: int) -> None:
        """Tell the JVM how many of its transactions are decided (its in-flight window)."""
        if decided != self._told:
            self._told = decided
            self._tell(f"decided {decided}")

    def stop_sending(self) -> None:
        """Tell it to send no more transactions; its checker still answers."""
        self._tell("enough")

    @property
    def sending_done(self) -> bool:
        """Return True once it sent everything (or ended)."""
        return self._ended.is_set()

    def alive(self) -> bool:
        """Return True while the JVM runs (without reaping it: finish() reads its rusage)."""
        assert self.process is not None
        flags = os.WEXITED | os.WNOHANG | os.WNOWAIT
        return os.waitid(os.P_PID, self.process.pid, flags) is None

    def finish(self, timeout: float = 60) -> dict[str, Any]:
        """Tell it to stop, wait for it, and return its results; raise on its failure."""
        assert self.process is not None
        self._tell("stop")
        deadline = time.monotonic() + timeout
        while self.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.alive():
            self.process.kill()
        _, status, usage = os.wait4(self.process.pid, 0)  # reaped here: its rusage
        self.process.returncode = os.waitstatus_to_exitcode(status)
        if self._reader is not None:
            self._reader.join(10)
        errors = (self.plan.home / "stderr.txt").read_text(errors="replace")[-3000:]
        if self.process.returncode != 0 or self._errors or not self.plan.out_file.exists():
            raise RuntimeError(
                f"the grpc load (RocketMQ's Java client) failed with exit code "
                f"{self.process.returncode}: {self._errors[:3]}\n{errors}"
            )
        with self.plan.out_file.open() as lines:
            result = parse_records(lines)
        return {
            **result,
            "send_started_ms": self._times["started_ms"],
            "send_finished_ms": self._times["finished_ms"],
            "senders": self.plan.senders,
            "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 2),
            "peak_rss_bytes": self._peak,
        }
