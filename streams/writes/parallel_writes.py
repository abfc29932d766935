"""Independent writes of one micro-batch, run side by side.

A Delta commit spends most of its time on the driver (reading and writing the log, small
jobs), so a batch that appends to several tables one after the other waits for each in
turn while the two cores idle. Writes to different tables that no order ties together run
in threads instead; a chain whose order matters (topic rows before queue offsets, check rows
before publishing) stays one step, run in order inside its thread.

The threads are a pool kept for the process, not new ones per batch: PySpark's
`InheritableThread` (a thread per step) opened a py4j connection and a JVM thread for each
step and closed them after, ten a batch, each paid in the batch's time and the driver's
CPU. A pool thread keeps its py4j connection; before each step it takes the calling
thread's Spark local properties (as `InheritableThread` does at its start), so a step's
Spark jobs belong to the streaming query like the batch's own. Every step is waited for;
the first failure is raised after all have ended, so a failed batch leaves no write still
running when Spark replays it.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from pyspark.sql import SparkSession

from streams.progress.step_timer import StepTimer

#: A step: its name (for the timer's log line) and what it does.
Step = tuple[str, Callable[[], None]]

#: Threads of the pool. A step may run steps of its own (a chain with parts side by side),
#: each waiting for a thread: a batch runs about a dozen at most, so this many never all
#: wait on one another.
POOL_THREADS = 32

#: The pool (it starts its threads as steps first need them).
_POOL = ThreadPoolExecutor(POOL_THREADS, thread_name_prefix="txcoord-write")


def run_steps(spark: SparkSession, steps: list[Step], timer: StepTimer) -> None:
    """Run `steps` side by side, each timed as its own step; raise the first failure."""
    if len(steps) == 1:
        name, step = steps[0]
        with timer.step(name):
            step()
        return
    context = spark.sparkContext._jsc.sc()
    properties = context.getLocalProperties().clone()

    def run(name: str, step: Callable[[], None]) -> None:
        context.setLocalProperties(properties.clone())  # a step's own, as a thread's are
        with timer.step(name):
            step()

    futures: list[Future[None]] = [_POOL.submit(run, name, step) for name, step in steps]
    failures = [future.exception() for future in futures]  # waits for every step
    for failure in failures:
        if failure is not None:
            raise failure
