"""A streaming query listener that receives each batch's progress as one JSON document.

PySpark's `StreamingQueryListener` turns every progress event into Python objects field by
field: one py4j round trip per field of the progress, of each source and of each state
operator (RocksDB reports about twenty custom metrics), and py4j looks some of them up as
classes on the JVM's class path, which for a name that is not a class means searching every
jar. The engine reports a batch per second and every listener paid that again, in the
driver and in the JVM (docs/performance.md has the measurement).

`listen` registers a `ProgressListener` through the same JVM wrapper PySpark uses
(`PythonStreamingQueryListenerWrapper`), but hands it only `json.loads(progress.json())`:
the same document `StreamingQueryProgress.json` gives, read in one call.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar

from pyspark.java_gateway import ensure_callback_server_started
from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

JVM_INTERFACE = "org.apache.spark.sql.streaming.PythonStreamingQueryListener"


class ProgressListener(ABC):
    """Receives the progress of every micro-batch of every query of a session."""

    @abstractmethod
    def on_progress(self, progress: dict[str, Any]) -> None:
        """Called with the batch's progress (the JSON of `StreamingQueryProgress`) as a dict."""


class _JsonProgress:
    """The py4j side of the JVM's listener interface: progress events only, as JSON."""

    def __init__(self, listener: ProgressListener) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 (the JVM interface's name)
        """Nothing to do when a query starts."""

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        """Hand the batch's progress to the listener; a failure is logged, never raised into
        Spark's listener bus."""
        try:
            self.listener.on_progress(json.loads(jevent.progress().json()))
        except Exception:
            log.exception("progress listener %s failed", type(self.listener).__name__)

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        """Nothing to do when a query is idle."""

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        """Nothing to do when a query ends (its failure surfaces through the query)."""

    class Java:
        implements: ClassVar[list[str]] = [JVM_INTERFACE]


def listen(spark: SparkSession, listener: ProgressListener) -> Callable[[], None]:
    """Register `listener` for every query of `spark`; return the function that removes it."""
    gateway = spark.sparkContext._gateway
    assert gateway is not None, "a classic (non-Connect) Spark session is needed"
    ensure_callback_server_started(gateway)  # type: ignore[no-untyped-call]
    wrapper = gateway.jvm.org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper(
        _JsonProgress(listener)
    )
    manager = spark._jsparkSession.streams()
    manager.addListener(wrapper)
    return lambda: manager.removeListener(wrapper)
