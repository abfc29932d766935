"""The nemesis: a schedule of seeded random faults under the guarantee tests' mixed load.

The crash test runs it in its run of the shared layout, after its own kills
(tests/guarantees/test_crash_recovery.py, which tells how to run a longer schedule).

`plan` draws the whole schedule from the test's seeded generator before anything starts, so a
seed names the same schedule on any machine (`TXCOORD_TEST_SEED=<seed>` replays it): each
step is some seconds of load, then one fault. The kinds are drawn like cards from a shuffled
deck, dealt anew when empty, so that a short schedule (the gate's three steps) has three
different faults and a long one every kind about equally often:

- `kill`: kill -9 of the coordinator at that moment, then a start;
- `failpoint`: kill -9, then a start with one of the crash test's failpoints armed
  (tests/guarantees/test_crash_recovery.py CRASH_STARTS), killed there, then a start;
- `broker`: kill -9 of the broker, away a few seconds, started again (from then on a
  coordinator that lost the broker may exit: an acceptable cause, tests/guarantees/app_runs.py);
- `freeze`: SIGSTOP of the coordinator's process group for a few seconds, then SIGCONT: the
  same driver goes on;
- `stop`: a clean stop (SIGTERM), then a start;
- `lost-checkpoint`: kill -9 or a clean stop, the checkpoint folder removed, a start: it
  derives the state from the warehouse (contract 7.11) and says so;
- `second-driver`: a second coordinator started beside the running one, which must stop
  fenced (exit code 3, contract 7.10);
- `rebuild`: kill -9 or a clean stop, `txcoord state rebuild` from the checkpoint or from the
  warehouse into another partition count, and a start with `spark.shuffle_partitions` changed
  to match (a restart with a changed configuration).

`Nemesis` runs the steps against a `Scenario` (tests/guarantees/mixed_load.py) and keeps
their history, which every failure message of the test carries with the seed. After each
fault it waits for a positive marker, the newest coordinator's watermark past the moment the
fault ended (restarting it after an acceptable exit), so that each step leaves a coordinator
behind that runs, and the next fault meets a working system.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from random import Random

from deltalake import DeltaTable

from coordinator.runtime.local_stack.kafka_broker import KafkaBroker
from streams.state.rebuild import SOURCES
from tests.app_process import AppProcess
from tests.guarantees.app_runs import SPARK_WORKER_TIMEOUT, exit_cause
from tests.guarantees.mixed_load import Scenario
from tests.guarantees.test_overlapping_drivers import wait_fenced
from tests.harness import last_progress, watermark_past

KILL, FAILPOINT, BROKER, FREEZE = "kill", "failpoint", "broker", "freeze"
STOP, LOST_CHECKPOINT = "stop", "lost-checkpoint"
SECOND_DRIVER, REBUILD = "second-driver", "rebuild"
KINDS = (KILL, FAILPOINT, BROKER, FREEZE, STOP, LOST_CHECKPOINT, SECOND_DRIVER, REBUILD)
#: The partition counts a rebuild moves the state into (the scenario starts with 2).
PARTITIONS = (1, 2, 3, 4)
#: Seconds for the newest coordinator's watermark to pass the end of a fault (a start after
#: an acceptable exit included: AppRuns bounds the start itself).
SETTLE_BOUND = 300
#: Seconds for a clean stop: the batch in flight finishes first (on a loaded host a batch
#: after a restart took 60-110 s).
STOP_BOUND = 300
#: Seconds for `txcoord state rebuild` (a Spark session's start, the state, one batch).
REBUILD_BOUND = 480
#: The engine's line when it starts without a checkpoint (coordinator/runtime/engine.py).
DERIVED = "deriving the state from the warehouse"


@dataclass(frozen=True)
class Step:
    """One step of the schedule: `pause` seconds of load, then a fault of `kind`."""

    number: int
    kind: str
    pause: float
    failpoints: tuple[str, ...] = ()  # failpoint: armed in the start killed there
    seconds: float = 0.0  # broker: how long it is away; freeze: how long the driver is
    clean: bool = False  # lost-checkpoint, rebuild: stopped with SIGTERM, else kill -9
    source: str = ""  # rebuild: "checkpoint" or "warehouse"
    partitions: int = 0  # rebuild: the new partition count

    def __str__(self) -> str:
        what = {
            FAILPOINT: f" at {', '.join(self.failpoints)}",
            BROKER: f", away {self.seconds} s",
            FREEZE: f", frozen {self.seconds} s",
            LOST_CHECKPOINT: f" after a {'clean stop' if self.clean else 'kill -9'}",
            REBUILD: f" from the {self.source} into {self.partitions} partition(s) after a "
            f"{'clean stop' if self.clean else 'kill -9'}",
        }.get(self.kind, "")
        return f"step {self.number}: {self.pause} s of load, then {self.kind}{what}"


def plan(
    rng: Random, steps: int, failpoints: Sequence[tuple[str, ...]], partitions: int = 2
) -> list[Step]:
    """Return a schedule of `steps` faults drawn from `rng`: a `failpoint` step arms one of
    `failpoints` (the crash test's starts); `partitions` is the first start's count."""
    schedule: list[Step] = []
    deck: list[str] = []
    for number in range(1, steps + 1):
        if not deck:
            deck = rng.sample(KINDS, len(KINDS))
        kind = deck.pop()
        step = Step(number, kind, pause=round(rng.uniform(3, 10), 1))
        if kind == FAILPOINT:
            step = replace(step, failpoints=rng.choice(failpoints))
        elif kind in (BROKER, FREEZE):
            step = replace(step, seconds=round(rng.uniform(2, 8), 1))
        elif kind == LOST_CHECKPOINT:
            step = replace(step, clean=rng.random() < 0.5)
        elif kind == REBUILD:
            clean, source = rng.random() < 0.5, rng.choice(SOURCES)
            partitions = rng.choice([n for n in PARTITIONS if n != partitions])
            step = replace(step, clean=clean, source=source, partitions=partitions)
        schedule.append(step)
    return schedule


class History:
    """What the nemesis did, line by line, headed by the seed that replays it."""

    def __init__(self, seed: int, schedule: list[Step], replay: str) -> None:
        self.began = time.monotonic()
        self.lines = [f"nemesis: seed {seed} ({replay}={seed} replays it), {len(schedule)} steps:"]
        self.lines += [f"  planned {step}" for step in schedule]

    def note(self, text: str) -> None:
        """Add `text`, stamped with the seconds since the test began, and print it."""
        line = f"  {time.monotonic() - self.began:6.0f} s  {text}"
        self.lines.append(line)
        print(f"nemesis: {line.strip()}", flush=True)

    def text(self) -> str:
        """Return the seed, the schedule and what happened so far, one line each."""
        return "\n".join(self.lines)

    @contextlib.contextmanager
    def told(self) -> Iterator[None]:
        """Fail with the seed and the history so far added to any failure inside."""
        try:
            yield
        except Exception as error:
            raise AssertionError(f"{type(error).__name__}: {error}\n\n{self.text()}") from error


def rebuild_command(settings: dict[str, str], source: str, partitions: int) -> list[str]:
    """Return `txcoord state rebuild` on the test's own Kafka and checkpoint folder."""
    return [
        sys.executable, "-m", "coordinator", "state", "rebuild", "--cluster",
        "--from", source, "--partitions", str(partitions), "--driver-memory", "1g",
        *[arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")],
    ]  # fmt: skip


def halves_landed(warehouse: str) -> bool:
    """Return True if `system/half_messages` holds a row (the engine then derives a lost
    state from the warehouse: coordinator/runtime/engine.py)."""
    try:
        table = DeltaTable(f"{warehouse}/system/half_messages")
    except Exception:  # not created yet
        return False
    return bool(table.to_pyarrow_table(columns=["msg_id"]).num_rows)


def settle(run: Scenario, when: str, looked: Callable[[], None] = lambda: None) -> None:
    """Wait until the newest coordinator's watermark passed this moment (a batch after a
    fault), starting it again after an acceptable exit; `looked` is called at each look."""
    moment = time.time()
    deadline = time.monotonic() + SETTLE_BOUND
    while True:
        app = run.alive(when)
        looked()
        if watermark_past(last_progress(app.lines()), moment):
            return
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{when}: the coordinator's watermark did not pass the end of the fault "
                f"within {SETTLE_BOUND} s:\n{app.tail(60)}"
            )
        time.sleep(1)


class Nemesis:
    """Runs a schedule's faults against one scenario's coordinators and the broker."""

    def __init__(self, run: Scenario, broker: KafkaBroker, history: History) -> None:
        self.run, self.broker, self.history = run, broker, history
        self.rebuilds = 0
        self._unplanned_seen = 0
        self._faults: dict[str, Callable[[Step, AppProcess], None]] = {
            KILL: self._kill,
            FAILPOINT: self._failpoint,
            BROKER: self._broker,
            FREEZE: self._freeze,
            STOP: self._stop,
            LOST_CHECKPOINT: self._lost_checkpoint,
            SECOND_DRIVER: self._second_driver,
            REBUILD: self._rebuild,
        }

    def step(self, step: Step) -> None:
        """Let the load run `step.pause` seconds, inflict the fault, wait until a coordinator
        runs past it."""
        # The sleep is the schedule (when the fault comes), not synchronisation: the settling
        # after the fault waits for a positive marker.
        time.sleep(step.pause)
        app = self.run.alive(f"before step {step.number}")
        self.history.note(f"{step} ({self.run.runs.starts} application starts so far)")
        self._faults[step.kind](step, app)
        self.settle(f"after step {step.number}")
        self.history.note(
            f"step {step.number} done: {self.run.runs.starts} starts so far, the newest "
            f"coordinator past the fault"
        )

    def settle(self, when: str) -> None:
        """Wait until the newest coordinator's watermark passed this moment (a batch after
        the fault), starting it again after an acceptable exit."""
        settle(self.run, when, self._note_unplanned)

    def _note_unplanned(self) -> None:
        for entry in self.run.runs.unplanned[self._unplanned_seen :]:
            self.history.note(f"unplanned restart (acceptable): {entry}")
        self._unplanned_seen = len(self.run.runs.unplanned)

    def _stopped(self, app: AppProcess, clean: bool, when: str) -> None:
        """Stop `app`: SIGTERM and a clean exit, or kill -9."""
        if not clean:
            app.kill9()
            return
        if (code := app.terminate(STOP_BOUND)) != 0:  # it failed meanwhile: judge why
            self.run.runs.exited(app, f"{when} (clean stop, exit code {code})")

    def _kill(self, step: Step, app: AppProcess) -> None:
        app.kill9()
        self.run.start()

    def _failpoint(self, step: Step, app: AppProcess) -> None:
        app.kill9()
        self.run.runs.crash_at(step.failpoints)
        self.history.note(f"killed at {', '.join(step.failpoints)}")
        self.run.start()

    def _broker(self, step: Step, app: AppProcess) -> None:
        self.run.runs.broker_killed = True  # from now on a lost broker is an acceptable exit
        self.broker.kill()
        time.sleep(step.seconds)  # the schedule: how long the broker is away
        self.broker.start()

    def _freeze(self, step: Step, app: AppProcess) -> None:
        # (Should it have exited since `alive` looked, the settling judges why.)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(app.process.pid, signal.SIGSTOP)
        try:
            time.sleep(step.seconds)  # the schedule: how long the driver is frozen
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(app.process.pid, signal.SIGCONT)

    def _stop(self, step: Step, app: AppProcess) -> None:
        self._stopped(app, clean=True, when=f"step {step.number}")
        self.run.start()

    def _lost_checkpoint(self, step: Step, app: AppProcess) -> None:
        self._stopped(app, step.clean, f"step {step.number}")
        # Read once it stopped: what it landed counts.
        landed = halves_landed(self.run.config.warehouse)
        shutil.rmtree(self.run.runs.settings["streams.checkpoint_dir"])
        unplanned = len(self.run.runs.unplanned)
        started = self.run.start()
        # The start that derived may have exited acceptably and its successor found the state
        # it had kept: the line is then in the earlier start's output.
        if landed and len(self.run.runs.unplanned) == unplanned:
            assert any(DERIVED in line for line in started.lines()), (
                f"a start without its checkpoint did not say it derived the state:\n"
                f"{started.tail(80)}"
            )

    def _second_driver(self, step: Step, app: AppProcess) -> None:
        self.run.start()
        wait_fenced(app, "the coordinator running when a newer one started")

    def _rebuild(self, step: Step, app: AppProcess) -> None:
        self._stopped(app, step.clean, f"step {step.number}")
        settings = self.run.runs.settings
        for attempt in (1, 2):
            process = AppProcess(
                {}, command=rebuild_command(settings, step.source, step.partitions)
            )
            try:
                code = process.process.wait(REBUILD_BOUND)
            except subprocess.TimeoutExpired:
                process.kill9()
                raise AssertionError(
                    f"the rebuild did not end within {REBUILD_BOUND} s:\n{process.tail(60)}"
                ) from None
            process.kill9()  # reap what is left of its tree
            if code == 0:
                break
            # Spark's fixed 10 s for a Python worker, missed on a loaded host, is the one
            # acceptable cause (as for the application): the same command finishes it.
            cause = exit_cause(process)
            assert attempt == 1 and SPARK_WORKER_TIMEOUT.search(cause), (
                f"the rebuild exited {code}: {cause[:500]}\n{process.tail(60)}"
            )
            self.history.note(f"rebuild exited {code}, run again: {cause[:500]}")
        self.rebuilds += 1
        # The coordinator now starts with the configuration the new checkpoint was made for.
        settings["spark.shuffle_partitions"] = str(step.partitions)
        self.run.start()
