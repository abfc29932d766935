"""What the coordinator's stateful stage is given, and the kinds of rows it hands the writer.

The stage's rules run in the JVM (streams/jvm/txcoord/Lifecycle.java, called from
streams/stage/processor.py): for one (producer group, transaction id), what arrived in a
micro-batch and the store time the stream has reached decide the new state, the rows to emit
and the next timer (contract 3 and 7). The readable reference model of those rules, and the
differential test that holds the JVM to it, are tests/reference/lifecycle.py and
tests/streams/stage/test_lifecycle_twin.py. Here is only what both share with the product: the
configuration in milliseconds (`Rules`) and what an emitted row asks the writer to do (`Kind`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Kind", "Rules"]


@dataclass(frozen=True)
class Rules:
    """The configuration, in milliseconds."""

    timeout_ms: int
    check_interval_ms: int
    check_max: int
    file_reserved_ms: int
    resolved_retention_ms: int
    orphan_wait_ms: int
    #: The largest immunity honoured. The ingest quarantines larger values; this clamp is
    #: defence in depth, so that no half can park itself beyond any timer (contract 4).
    max_check_immunity_ms: int


class Kind(StrEnum):
    """What an emitted row asks the writer to do."""

    DELIVER = "DELIVER"  # append to topics/<topic>
    CHECK = "CHECK"  # append to system/check_requests and publish to the check topic
    FINAL = "FINAL"  # append to system/transactions
    DISCARD = "DISCARD"  # append to system/discarded
    VERDICT = "VERDICT"  # append to system/op_verdicts
