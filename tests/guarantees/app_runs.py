"""The crash test's application starts: planned kills at failpoints, and the exits it did not plan.

Every start of `deploy/submit-coordinator` goes through `AppRuns`, which counts them and keeps
the application's own exits (unplanned restarts) with their reasons. The test restarts the
application after such an exit, as a supervisor would, only when the cause is known and
acceptable; anything else fails the test, and every unplanned restart is printed.

What is acceptable, and why:
- anywhere: Spark's "Python worker failed to connect back" (a worker did not start within
  Spark's fixed 10 s on an overloaded machine). A query fails, the engine exits non-zero; the
  restart replays the batch, which is what the crash test checks anyway;
- after the broker kill only: an exit whose error names one of the Kafka clients' exceptions
  for a broker that does not answer (BROKER_LOSS: Spark's Kafka source and the Java clients,
  kafka-python in the check publisher): a stream lost the broker, and the engine stops
  rather than run half a pipeline.

A cause is matched against the application's error only (its `error:` line and what follows,
up to the query's plan), never the whole output: the plan and the log name Kafka, S3 and
Spark everywhere, so a substring such as `kafka` accepted nearly any error. Measured: the
gate's runs exit on their own 0 times in 27 starts (tests/gate_budget.py prints them).

At most MAX_UNPLANNED such exits: more means the run no longer tests the planned crashes.
"""

from __future__ import annotations

import re
import time

from coordinator.core.failpoints import OPTION, REACHED
from tests.app_process import AppProcess

#: Seconds to wait for the application to say it runs (JVM and Spark warm-up): hang signals,
#: two to three times the longest start the gate measured on a loaded host (tests/gate_budget.py
#: prints every run's starts, longest first per master). On local[2]: median 14.3 s, longest
#: 42.4 s idle; beside a one-core CPU hog median 17.3-18.7 s, longest 40.1 s and 70.2 s (the
#: per-group crash test's restart after its kill, 2026-12-06). On the Spark standalone cluster
#: (its executors' JVMs cold): 47.8 s idle, 59.9-65.9 s hogged. They were 240 s and 360 s, set
#: when a cluster start still created its tables with Spark jobs (delta_tables/table.py).
START_BOUND = 180
CLUSTER_START_BOUND = 180
#: Seconds to wait for a start's failpoints, after it runs.
FAILPOINT_BOUND = 600
MAX_UNPLANNED = 3
#: What this worker's application starts took, and the exits they did not plan, for the
#: gate's report (tests/guarantees/conftest.py hands each test's to its report; the gate's
#: summary prints them: tests/gate_budget.py). The start bound is set from these figures.
JOURNAL: list[dict[str, object]] = []
SPARK_WORKER_TIMEOUT = re.compile(r"Python worker failed to connect back")
#: The exceptions of a broker that does not answer, by their full names: the Java clients'
#: (Spark's Kafka source, the stage's producer) and kafka-python's (the check publisher).
BROKER_LOSS = re.compile(
    r"\borg\.apache\.kafka\.common\.errors\.(TimeoutException|NetworkException"
    r"|DisconnectException|NotLeaderOrFollowerException|LeaderNotAvailableException)\b"
    r"|\bkafka\.errors\.(KafkaTimeoutError|NoBrokersAvailable|KafkaConnectionError"
    r"|NodeNotReadyError|RequestTimedOutError)\b"
)
#: Where the application's error ends and Spark's description of the query begins.
PLAN = "=== Streaming Query ==="


def name_of(spec: str) -> str:
    """Return the failpoint name of a `name=N` specification."""
    return spec.split("=", maxsplit=1)[0]


def exit_cause(app: AppProcess) -> str:
    """Return the application's error (`cause_in` its output)."""
    return cause_in(app.tail(2000))


def cause_in(output: str) -> str:
    """Return the error in an application's output: its `error:` line and the lines after
    it, up to the query's plan (a Python error inside a batch ends its traceback there), as
    one text; without an `error:` line, the last line naming an exception."""
    lines = output.splitlines()
    for at, line in enumerate(lines):
        if line.startswith("error:"):
            block = []
            for more in lines[at:]:
                if more.strip() == PLAN:
                    break
                block.append(more.strip())
            return " | ".join(block)[:4000]
    marked = [line for line in lines if re.search(r"Exception|Error", line)]
    return (marked or lines or ["no output"])[-1].strip()[:500]


def exit_reason(app: AppProcess) -> str:
    """Return why the application stopped, short enough for a report line."""
    return exit_cause(app)[:500]


class AppRuns:
    """Starts the application for one test; records and judges its unplanned exits."""

    def __init__(
        self,
        settings: dict[str, str],
        master: str = "local[2]",
        spark_conf: dict[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.master, self.spark_conf = master, spark_conf
        self.starts = 0
        self.unplanned: list[str] = []
        self.broker_killed = False  # from then on a lost broker is an acceptable cause
        self.acceptable: list[re.Pattern[str]] = []  # further causes a test accepts

    def start(self, failpoints: tuple[str, ...] = ()) -> AppProcess:
        """Start the application (with `failpoints` armed) and wait until it runs."""
        while True:
            self.starts += 1
            began = time.monotonic()
            app = AppProcess(
                self.settings,
                *[a for spec in failpoints for a in (OPTION, spec)],
                master=self.master,
                spark_conf=self.spark_conf,
            )
            bound = START_BOUND if self.master.startswith("local") else CLUSTER_START_BOUND
            if app.wait_for_line("txcoord coordinator running", bound):
                seconds = round(time.monotonic() - began, 1)
                JOURNAL.append({"start_seconds": seconds, "master": self.master})
                return app
            if app.process.poll() is None:  # neither running nor exited: a hung start
                app.kill9()
                raise AssertionError(
                    f"the application (master {self.master}) did not say it runs within the "
                    f"start bound of {bound} s (app_runs.py):\n{app.tail(80)}"
                )
            self.exited(app, "while starting")

    def exited(self, app: AppProcess, when: str) -> None:
        """Record an exit the test did not cause; fail unless its cause is acceptable."""
        app.kill9()  # reap it (and anything left of its tree)
        cause = exit_cause(app)
        entry = f"{when}: exit code {app.process.returncode}: {cause[:500]}"
        self.unplanned.append(entry)
        JOURNAL.append({"unplanned": entry})
        print(f"crash test: unplanned restart {len(self.unplanned)}: {entry}", flush=True)
        known = [SPARK_WORKER_TIMEOUT, *self.acceptable]
        known += [BROKER_LOSS] if self.broker_killed else []
        assert any(known_cause.search(cause) for known_cause in known), (
            f"the application exited {when}, cause not acceptable:\n{app.tail(80)}"
        )
        assert len(self.unplanned) <= MAX_UNPLANNED, f"unplanned restarts: {self.unplanned}"

    def crash_at(self, specs: tuple[str, ...]) -> None:
        """Start with `specs` armed and kill -9 once all are reached (in order; each freezes).

        A failpoint not reached within FAILPOINT_BOUND of a start fails the test. After an
        acceptable unplanned exit the start is made again with the same failpoints.
        """
        while True:
            app = self.start(specs)
            deadline = time.monotonic() + FAILPOINT_BOUND
            try:
                for spec in specs:
                    line = REACHED.format(name=name_of(spec))
                    # Reached before the application said it runs (its first batch runs
                    # before that), or after.
                    if any(line in seen for seen in app.output):
                        continue
                    if not app.wait_for_line(line, deadline - time.monotonic()):
                        break
                else:
                    print(f"crash test: killed at {', '.join(specs)}", flush=True)
                    return
            finally:
                if app.process.poll() is None:
                    app.kill9()
            if app.process.returncode is not None and app.process.returncode != -9:
                self.exited(app, f"before failpoint {spec}")
                continue
            raise AssertionError(
                f"failpoint {spec} not reached in {FAILPOINT_BOUND} s:\n{app.tail()}"
            )

    def report(self) -> str:
        """Return the starts and every unplanned restart with its reason."""
        lines = [
            f"crash test: {self.starts} application starts, "
            f"{len(self.unplanned)} unplanned restart(s)"
        ]
        return "\n".join(lines + [f"  - {entry}" for entry in self.unplanned])
