"""Independent writes of one micro-batch, run side by side.

A Delta commit spends most of its time on the driver (reading and writing the log, small
jobs), so a batch that appends to several tables one after the other waits for each in
turn while the two cores idle. Writes to different tables that no order ties together run
in threads instead; a chain whose order matters (topic rows before queue offsets, check rows
before publishing) stays one step, run in order inside its thread.

Threads are PySpark's `InheritableThread`: each gets its own JVM thread (pinned-thread
py4j) carrying the batch thread's local properties, so its jobs belong to the streaming
query like the batch's own. Every step is waited for; the first failure is raised after
all have ended, so a failed batch leaves no write still running when Spark replays it.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark import InheritableThread
from pyspark.sql import SparkSession

from streams.step_timer import StepTimer

#: A step: its name (for the timer's log line) and what it does.
Step = tuple[str, Callable[[], None]]


def run_steps(spark: SparkSession, steps: list[Step], timer: StepTimer) -> None:
    """Run `steps` side by side, each timed as its own step; raise the first failure."""
    if len(steps) == 1:
        name, step = steps[0]
        with timer.step(name):
            step()
        return
    failures: list[BaseException | None] = [None] * len(steps)

    def run(index: int, name: str, step: Callable[[], None]) -> None:
        try:
            with timer.step(name):
                step()
        except BaseException as exc:  # handed to the batch's thread below
            failures[index] = exc

    threads = [
        InheritableThread(run, args=(index, name, step), session=spark)
        for index, (name, step) in enumerate(steps)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for failure in failures:
        if failure is not None:
            raise failure
