"""Label values that clients choose, bounded before they become metric series (finding 9).

The lag gauges of `/metrics` are labelled with consumer group and topic names, and those come
from clients: a REST consumer names its group, and the consumer offsets topic holds whatever
any principal that may write it wrote (`[group, topic, queue]` as JSON, any strings). Each
new pair is a new series, kept by every scraper. So a pair becomes a label only when both
names are well formed (coordinator/protocol/names.py: a group name as a producer group's, a
topic name as a topic's), and a family has at most `max_series` series: the largest values
first (the lag an operator looks for), ties by name, and the rest, malformed pairs included,
summed into one series labelled OTHER, a value no well-formed name can take.
"""

from __future__ import annotations

from collections.abc import Mapping

from coordinator.protocol.names import group_problem, topic_name_problem

__all__ = ["OTHER", "bounded_pairs"]

#: The label of the series that sums the pairs left out ('(' is in no group or topic name).
OTHER = "(other)"


def bounded_pairs(
    values: Mapping[tuple[str, str], int], max_series: int
) -> dict[tuple[str, str], int]:
    """Return at most `max_series` (at least 1) series of `values`, keyed by (group, topic):
    well-formed pairs, largest values first, and the others' sum under (OTHER, OTHER)."""
    well_formed = sorted(
        (
            (pair, value)
            for pair, value in values.items()
            if group_problem(pair[0]) is None and topic_name_problem(pair[1]) is None
        ),
        key=lambda item: (-item[1], item[0]),
    )
    room = max(1, max_series)
    if len(well_formed) == len(values) and len(well_formed) <= room:
        return dict(well_formed)
    kept = dict(well_formed[: room - 1])
    kept[OTHER, OTHER] = sum(values.values()) - sum(kept.values())
    return kept
