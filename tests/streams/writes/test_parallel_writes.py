"""Steps of one batch run side by side on kept threads, with the batch's Spark properties."""

from __future__ import annotations

import threading

import pytest
from pyspark.sql import SparkSession

from streams.progress.step_timer import StepTimer
from streams.writes.parallel_writes import run_steps


def test_steps_run_side_by_side_on_kept_threads_with_the_callers_spark_properties(
    spark: SparkSession,
) -> None:
    context = spark.sparkContext
    context.setLocalProperty("txcoord.test.batch", "7")
    both = threading.Barrier(2, timeout=30)  # one step alone would wait for ever
    seen: dict[str, tuple[str | None, int, str]] = {}

    def step(name: str) -> None:
        both.wait()
        # A Spark job in the step: it runs under the caller's properties.
        rows = spark.range(5).count()
        thread = threading.current_thread().name
        seen[name] = (context.getLocalProperty("txcoord.test.batch"), rows, thread)

    timer = StepTimer()
    try:
        run_steps(spark, [("a", lambda: step("a")), ("b", lambda: step("b"))], timer)
        first = dict(seen)
        context.setLocalProperty("txcoord.test.batch", "8")
        run_steps(spark, [("a", lambda: step("a")), ("b", lambda: step("b"))], timer)
    finally:
        context.setLocalProperty("txcoord.test.batch", None)
    assert {name: values[:2] for name, values in first.items()} == {"a": ("7", 5), "b": ("7", 5)}
    assert {name: values[:2] for name, values in seen.items()} == {"a": ("8", 5), "b": ("8", 5)}
    # On the kept pool's threads, not a thread made for the step.
    threads = {values[2] for values in [*first.values(), *seen.values()]}
    assert all(name.startswith("txcoord-write") for name in threads), threads


def test_the_first_failure_is_raised_after_every_step_ended(spark: SparkSession) -> None:
    ended = threading.Event()

    def slow() -> None:
        ended.wait(0.5)
        ended.set()

    def failing() -> None:
        raise ValueError("step failed")

    with pytest.raises(ValueError, match="step failed"):
        run_steps(spark, [("failing", failing), ("slow", slow)], StepTimer())
    assert ended.is_set()


def test_a_step_runs_steps_of_its_own(spark: SparkSession) -> None:
    done: list[str] = []
    lock = threading.Lock()

    def leaf(name: str) -> None:
        with lock:
            done.append(name)

    def chain() -> None:
        run_steps(spark, [("x", lambda: leaf("x")), ("y", lambda: leaf("y"))], StepTimer())
        leaf("after")

    run_steps(spark, [("chain", chain), ("z", lambda: leaf("z"))], StepTimer())
    assert sorted(done) == ["after", "x", "y", "z"]
    assert done.index("after") > max(done.index("x"), done.index("y"))
