"""The load process: a child process that sends transactions and answers their checks.

It runs apart from the benchmark's main process, which hosts the coordinator's Python
driver (foreachBatch) and the REST ingress: in one process the load generator and the
system under test would share one GIL, and neither's CPU time could be told apart.

Parent and child share five values: `sent` (child -> parent, for the progress bar),
`decided` (parent -> child: how many of this load's transactions the coordinator decided,
for the in-flight window), `enough` (parent -> child: send no more, as if the plan were
complete), `sending_done` (the child sent everything) and `stop` (the parent saw everything
decided, or gave up: stop answering checks, write the results, exit). The
results go to a JSON file: every transaction with its kind and acknowledgement times, every
check answer and first check, and the child's own CPU time and peak RSS.
"""

from __future__ import annotations

import ctypes
import json
import logging
import multiprocessing
import os
import resource
import signal
import threading
import time
import traceback
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from coordinator.bench.kafka_driver import KafkaDriver, now_ms
from coordinator.bench.pacing import Pacing
from coordinator.bench.resources import memory
from coordinator.bench.responder import Responder
from coordinator.bench.rest_driver import RestDriver
from coordinator.bench.workload import Kind, Mix, transaction_id

log = logging.getLogger(__name__)

_SPAWN = multiprocessing.get_context("spawn")


@dataclass(frozen=True)
class LoadPlan:
    """What one load process sends, where, and how fast."""

    path: str  # "kafka" or "rest"
    run: str  # prefix of every transaction id
    group: str
    topic: str
    mix: str  # Mix.parse form
    out_file: str
    bootstrap_servers: str
    half_topic: str
    op_topic: str
    check_topic: str
    rest_endpoint: str | None = None
    count: int | None = None
    duration: float | None = None
    window: int | None = 10_000
    rate: float | None = None
    batch: int = 500
    senders: int = 1
    body_size: int = 100
    answer_checks: bool = True
    # Set: halves only, no op, with this check immunity (the pending-state preload).
    immunity_seconds: int | None = None

    def __post_init__(self) -> None:
        if self.path not in ("kafka", "rest"):
            raise ValueError(f"path must be kafka or rest, not {self.path!r}")
        if self.path == "rest" and not self.rest_endpoint:
            raise ValueError("the rest path needs rest_endpoint")
        if self.count is None and self.duration is None:
            raise ValueError("give count or duration")
        if self.batch < 1 or self.senders < 1:
            raise ValueError("batch and senders must be at least 1")
        Mix.parse(self.mix)


class Driver(Protocol):
    """What the load needs of the Kafka and REST drivers."""

    half_acks: dict[str, int]
    op_acks: dict[str, int]

    def send(self, batch: list[tuple[str, Kind]], *, ops: bool = True) -> None: ...
    def finish(self) -> None: ...
    def close(self) -> None: ...


def _driver(plan: LoadPlan) -> Driver:
    if plan.path == "rest":
        assert plan.rest_endpoint is not None
        return RestDriver(plan.rest_endpoint, plan.group, plan.topic, body_size=plan.body_size)
    return KafkaDriver(
        plan.bootstrap_servers,
        plan.group,
        plan.topic,
        half_topic=plan.half_topic,
        op_topic=plan.op_topic,
        body_size=plan.body_size,
        immunity_seconds=plan.immunity_seconds,
    )


def _responder(plan: LoadPlan) -> Responder:
    transport: Any
    if plan.path == "rest":
        from coordinator.sdk.rest_transport import RestTransport  # noqa: PLC0415

        assert plan.rest_endpoint is not None
        transport = RestTransport(plan.rest_endpoint, plan.group)
    else:
        from coordinator.sdk.kafka_transport import KafkaTransport  # noqa: PLC0415

        transport = KafkaTransport(
            plan.bootstrap_servers,
            plan.group,
            half_topic=plan.half_topic,
            op_topic=plan.op_topic,
            check_topic=plan.check_topic,
        )
    return Responder(transport, plan.group)


class Control:
    """The values parent and child share (see the module docstring)."""

    def __init__(self) -> None:
        self.sent = _SPAWN.Value("q", 0)
        self.decided = _SPAWN.Value("q", 0)
        self.enough = _SPAWN.Event()
        self.sending_done = _SPAWN.Event()
        self.stop = _SPAWN.Event()


class _Sender:
    """Deals transactions to sender threads under the pacing bounds."""

    def __init__(self, plan: LoadPlan, control: Control, driver: Driver) -> None:
        self.plan, self.control, self.driver = plan, control, driver
        self.pacing = Pacing(window=plan.window, rate=plan.rate)
        self.kinds = Mix.parse(plan.mix).kinds()
        self.number = 0
        self.sent: dict[str, str] = {}  # transaction id -> kind name
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.failure: BaseException | None = None

    def _take(self) -> list[tuple[str, Kind]] | None:
        """Return the next batch to send, [] to wait, None when the plan is complete."""
        plan = self.plan
        with self.lock:
            elapsed = time.monotonic() - self.started
            control = self.control
            if control.stop.is_set() or control.enough.is_set() or self.failure is not None:
                return None
            if plan.duration is not None and elapsed >= plan.duration:
                return None
            limit = plan.batch
            if plan.count is not None:
                limit = min(limit, plan.count - self.number)
                if limit <= 0:
                    return None
            room = self.pacing.room(
                sent=self.number, decided=self.control.decided.value, elapsed=elapsed, limit=limit
            )
            batch = []
            for _ in range(room):
                kind = next(self.kinds)
                batch.append((transaction_id(plan.run, self.number, kind), kind))
                self.number += 1
            return batch

    def run(self) -> None:
        try:
            while (batch := self._take()) is not None:
                if not batch:
                    time.sleep(0.005)
                    continue
                self.driver.send(batch, ops=self.plan.immunity_seconds is None)
                with self.lock:
                    self.sent.update((tx, kind.name) for tx, kind in batch)
                    self.control.sent.value = len(self.sent)
        except BaseException as exc:
            with self.lock:
                self.failure = self.failure or exc
            raise


def die_with_parent() -> None:
    """Ask the kernel to SIGTERM this process when its parent dies (even by kill -9)."""
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the parent's stop() is all there is
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def run_load(plan: LoadPlan, control: Control) -> None:
    """Send the plan's transactions, answer their checks until told to stop, write results."""
    die_with_parent()
    result: dict[str, Any] = {"plan": asdict(plan), "error": None}
    responder = None
    driver: Driver | None = None
    try:
        if plan.answer_checks and plan.immunity_seconds is None and Mix.parse(plan.mix).has_checked:
            responder = _responder(plan).start()
        driver = _driver(plan)
        sender = _Sender(plan, control, driver)
        result["send_started_ms"] = now_ms()
        threads = [
            threading.Thread(target=sender.run, name=f"bench-sender-{i}", daemon=True)
            for i in range(plan.senders)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if sender.failure is not None:
            raise sender.failure
        driver.finish()
        result["send_finished_ms"] = now_ms()
        result["transactions"] = [
            [tx, kind, driver.half_acks.get(tx), driver.op_acks.get(tx)]
            for tx, kind in sender.sent.items()
        ]
        control.sending_done.set()
        control.stop.wait()
    except BaseException as exc:
        result["error"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    finally:
        control.sending_done.set()
        if responder is not None:
            try:
                responder.stop()
            except Exception as exc:
                result["error"] = result["error"] or f"responder: {exc}"
            result["responder"] = responder.results()
        if driver is not None:
            driver.close()
        usage = resource.getrusage(resource.RUSAGE_SELF)
        result["cpu_seconds"] = round(usage.ru_utime + usage.ru_stime, 2)
        result["peak_rss_bytes"] = memory()[1]
        Path(plan.out_file).write_text(json.dumps(result))


class LoadProcess:
    """The parent's handle on one load process."""

    def __init__(self, plan: LoadPlan) -> None:
        self.plan = plan
        self.control = Control()
        self.process = _SPAWN.Process(
            target=run_load, args=(plan, self.control), name=f"bench-load-{plan.path}", daemon=True
        )

    def start(self) -> LoadProcess:
        """Start the child."""
        self.process.start()
        return self

    @property
    def pid(self) -> int | None:
        """Return the child's pid once started."""
        return self.process.pid

    @property
    def sent(self) -> int:
        """Return how many transactions the child sent so far."""
        return int(self.control.sent.value)

    def tell_decided(self, decided: int) -> None:
        """Tell the child how many of its transactions are decided (its in-flight window)."""
        self.control.decided.value = decided

    def stop_sending(self) -> None:
        """Tell the child to send no more transactions; it still answers their checks."""
        self.control.enough.set()

    @property
    def sending_done(self) -> bool:
        """Return True once the child sent everything (or failed)."""
        return self.control.sending_done.is_set()

    def alive(self) -> bool:
        """Return True while the child runs."""
        return self.process.is_alive()

    def finish(self, timeout: float = 60) -> dict[str, Any]:
        """Tell the child to stop, wait for it, and return its results; raise on its failure."""
        self.control.stop.set()
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
            raise RuntimeError(f"the {self.plan.path} load process did not stop in {timeout} s")
        path = Path(self.plan.out_file)
        if not path.exists():
            raise RuntimeError(
                f"the {self.plan.path} load process died (exit code "
                f"{self.process.exitcode}) without writing {path}"
            )
        result: dict[str, Any] = json.loads(path.read_text())
        if result.get("error"):
            raise RuntimeError(f"the {self.plan.path} load process failed: {result['error']}")
        return result
