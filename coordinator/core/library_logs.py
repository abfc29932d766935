"""What the client libraries log, in our processes' terms.

kafka-python 3.0 logs ``ERROR kafka.cluster: Metadata refresh: failed ...`` when one
metadata request meets a connection that is closing (``Transport closed for writes``: it
happens now and then at a client's start, when its bootstrap connection is replaced by the
broker's own). The client tries again on its next refresh
(coordinator/kafka_clients/metadata_refresh.py keeps kafka-python's refresh loop going past
it), nothing is lost; an ERROR there reads like a failure of ours in `txcoord up`'s output
and in every log search for errors. A refresh that keeps failing still shows, at WARNING,
once per attempt.

kafka-python 3.0.12's event loop logs ``ERROR kafka.net.selector: Unhandled exception in task``
with a traceback ending ``ValueError: Invalid file descriptor: -1`` when a task waits to read
from a connection the client closed meanwhile (a bootstrap connection replaced at the
client's start: the socket's descriptor is already -1 when the read is registered). The task
ends with the connection it was reading, which the client opens again when it next needs it;
`txcoord up` printed the traceback in the middle of a healthy start (the gate's run of a1992bf,
tests/coordinator/commands/test_up.py). That one exception is logged as a one-line WARNING;
any other exception of a task stays an ERROR with its traceback.
"""

from __future__ import annotations

import logging

#: The kafka-python records demoted whatever they carry, by logger and start of message.
TRANSIENT = (("kafka.cluster", "Metadata refresh: failed"),)
#: kafka-python's event loop, the start of its record for a task that raised, and the one
#: exception of such a task that is demoted (a read on a connection closed meanwhile).
TASK_LOGGER, TASK_FAILED, CLOSED_SOCKET = (
    "kafka.net.selector",
    "Unhandled exception in task",
    "Invalid file descriptor: -1",
)
#: The records demoted only when they carry one exception: logger, start of message, the
#: exception as `Type: message`, and what it means (the traceback is folded into these).
TRANSIENT_EXCEPTIONS = (
    (
        TASK_LOGGER,
        TASK_FAILED,
        f"ValueError: {CLOSED_SOCKET}",
        "a read on a connection the client closed meanwhile; it connects again when it next "
        "needs to",
    ),
)


class DemoteTransient(logging.Filter):
    """Log a transient client-library ERROR as a WARNING (changes the record, drops nothing).

    With `exception`, only a record carrying that exception (`Type: message`) is demoted,
    and its traceback becomes one line: the exception and `why` it is harmless."""

    def __init__(self, prefix: str, exception: str | None = None, why: str = "") -> None:
        super().__init__()
        self.prefix, self.exception, self.why = prefix, exception, why

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.ERROR or not str(record.msg).startswith(self.prefix):
            return True
        if self.exception is not None:
            error = record.exc_info[1] if record.exc_info else None
            if error is None or f"{type(error).__name__}: {error}" != self.exception:
                return True
            record.msg = f"{record.msg} {self.exception} ({self.why})"
            record.exc_info, record.exc_text = None, None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def demote_transient_library_errors() -> None:
    """Install the demotions on their loggers (once, however often called)."""
    demoted = [(name, prefix, None, "") for name, prefix in TRANSIENT]
    for name, prefix, exception, why in [*demoted, *TRANSIENT_EXCEPTIONS]:
        logger = logging.getLogger(name)
        if not any(isinstance(f, DemoteTransient) for f in logger.filters):
            logger.addFilter(DemoteTransient(prefix, exception, why))
