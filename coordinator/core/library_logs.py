"""What the client libraries log, in our processes' terms.

kafka-python 3.0 logs ``ERROR kafka.cluster: Metadata refresh: failed ...`` when one
metadata request meets a connection that is closing (``Transport closed for writes``: it
happens now and then at a client's start, when its bootstrap connection is replaced by the
broker's own). The client tries again on its next refresh
(coordinator/kafka_clients/metadata_refresh.py keeps kafka-python's refresh loop going past
it), nothing is lost; an ERROR there reads like a failure of ours in `txcoord up`'s output
and in every log search for errors. A refresh that keeps failing still shows, at WARNING,
once per attempt.
"""

from __future__ import annotations

import logging

#: The one kafka-python record demoted, by its logger and the start of its message.
TRANSIENT = (("kafka.cluster", "Metadata refresh: failed"),)


class DemoteTransient(logging.Filter):
    """Log a transient client-library ERROR as a WARNING (changes the record, drops nothing)."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and str(record.msg).startswith(self.prefix):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def demote_transient_library_errors() -> None:
    """Install the demotion on each logger of TRANSIENT (once, however often called)."""
    for name, prefix in TRANSIENT:
        logger = logging.getLogger(name)
        if not any(isinstance(f, DemoteTransient) for f in logger.filters):
            logger.addFilter(DemoteTransient(prefix))
