"""The gate in front of a foreachBatch function: a stop that lets the batch in flight finish.

`StreamingQuery.stop()` interrupts the query's thread wherever it is. Inside a Python
foreachBatch function that thread is busy running our Spark jobs (pinned-thread py4j), so
the interrupt surfaces as a `Py4JJavaError` carrying a java.lang.InterruptedException with
the whole JVM stack in its message. Delta logs "Aborting job" at ERROR, py4j logs the
traceback at ERROR, and Spark decides whether the failure was "interrupted by stop" with
`StreamExecution.PROXY_ERROR`, a regex of the form `calling((.|\\r\\n|\\r|\\n)*)(Interrupted…)`
that recurses once per character: over a message that long it throws StackOverflowError in
the stream thread. None of that loses data (the batch is replayed from the checkpoint, and
every write is idempotent), but an orderly stop should not read like a crash.

So an orderly stop goes through the gate (coordinator/runtime/engine.py):

1. `close()`: a batch that reaches its foreachBatch function from now on does not start its
   work; it *parks*: it sleeps in the JVM, on the stream thread itself, until the query's
   stop interrupts that sleep.
2. The engine waits until the query is parked or between triggers (never in the middle of
   a batch's writes), then calls `query.stop()`.
3. The interrupted batch ends with `BatchStopped`, whose short message is exactly the form
   Spark recognises as a stop (SPARK-39218): the query ends as "Stopped", without an error,
   and the batch — planned and logged in the offset log, never committed — is replayed by
   the next start. A batch cut short any other way (a stop that could not wait) ends the
   same way, so the regex never sees a long message.

py4j logs every exception of a Python callback at ERROR; `QuietStop` drops exactly the
records of a `BatchStopped`, and nothing else.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

from py4j.protocol import Py4JJavaError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["BatchGate", "BatchStopped", "is_interruption"]

#: The JVM exceptions that mean "this thread was interrupted" (Spark's IO_EXCEPTION_NAMES).
INTERRUPTIONS = frozenset(
    {
        "java.lang.InterruptedException",
        "java.io.InterruptedIOException",
        "java.nio.channels.ClosedByInterruptException",
    }
)
#: How long one parked sleep lasts; the stop's interrupt ends it at once.
PARK_MILLIS = 60_000
#: Causes followed when looking for an interruption inside a JVM exception.
MAX_CAUSES = 16
#: The logger py4j reports Python-callback exceptions on.
PY4J_CALLBACK_LOGGER = "py4j.clientserver"


class BatchStopped(Exception):  # noqa: N818 - a stop, not an error
    """A micro-batch cut short by its query's stop; the next start replays it."""

    def __init__(self, batch_id: int) -> None:
        # The form of StreamExecution.PROXY_ERROR: how Spark tells a stop from a failure.
        super().__init__(
            f"py4j.protocol.Py4JJavaError: An error occurred while calling foreachBatch "
            f"(batch {batch_id}, stopped).\n: java.lang.InterruptedException"
        )
        self.batch_id = batch_id


class QuietStop(logging.Filter):
    """Drop py4j's ERROR record of a callback that ended with `BatchStopped`."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], BatchStopped))


_QUIET_STOP = QuietStop()


def is_interruption(error: Py4JJavaError) -> bool:
    """Return True if the JVM exception behind `error` (or one of its causes) is an interrupt."""
    throwable: Any = error.java_exception
    for _ in range(MAX_CAUSES):
        if throwable is None:
            return False
        if throwable.getClass().getName() in INTERRUPTIONS:
            return True
        throwable = throwable.getCause()
    return False


class BatchGate:
    """Lets an orderly stop wait for the batch in flight and keep the next one from starting."""

    def __init__(self) -> None:
        self._closed = threading.Event()
        self._parked = threading.Event()
        logging.getLogger(PY4J_CALLBACK_LOGGER).addFilter(_QUIET_STOP)  # once: same object

    @property
    def closed(self) -> bool:
        """Return True once `close` was called."""
        return self._closed.is_set()

    @property
    def parked(self) -> bool:
        """Return True while a batch waits at the closed gate for the query's stop."""
        return self._parked.is_set()

    def close(self) -> None:
        """Let no further batch start its work."""
        self._closed.set()

    @contextmanager
    def batch(self, spark: SparkSession, batch_id: int) -> Iterator[None]:
        """Run one batch's work, or park it if the gate is closed; see the module docstring."""
        if self._closed.is_set():
            self._park(spark, batch_id)
        try:
            yield
        except Py4JJavaError as error:
            if is_interruption(error):
                raise BatchStopped(batch_id) from None
            raise

    def _park(self, spark: SparkSession, batch_id: int) -> NoReturn:
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._parked.set()
        try:
            while True:  # on the stream thread (pinned py4j): the stop's interrupt ends it
                jvm.java.lang.Thread.sleep(PARK_MILLIS)
        except Py4JJavaError as error:
            if is_interruption(error):
                raise BatchStopped(batch_id) from None
            raise
