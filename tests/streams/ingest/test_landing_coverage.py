"""streams/ingest/landing_coverage.py and the rule of streams/state/landing_repair.py, without
Spark.

The coverage a landing commit records, the writer's coverage from batch to batch across a
start, and what a rebuild reads again and lands after a crash between the landing commits.
The engine end to end: tests/streams/ingest/test_partial_landing.py.
"""

from __future__ import annotations

import pyarrow as pa

from delta_tables import half_messages, op_records, quarantine
from streams.ingest.landing_coverage import Coverage, CoverageKeeper, TableMark, ends_of, merged
from streams.state.landing_repair import repair_of, unlanded
from streams.writes.delta_writes import MARK_APP_ID, MARK_BATCH_ID

HALVES, OPS, REFUSED = half_messages.TABLE.name, op_records.TABLE.name, quarantine.TABLE.name


def records(*rows: tuple[str, int, int, str | None, str]) -> pa.Table:
    """Parsed ingress records: (topic, partition, offset, reason, kind)."""
    topic, partition, offset, reason, kind = zip(*rows, strict=True) if rows else ([],) * 5
    return pa.table(
        {
            "source_topic": pa.array(topic, pa.string()),
            "source_partition": pa.array(partition, pa.int32()),
            "source_offset": pa.array(offset, pa.int64()),
            "reason": pa.array(reason, pa.string()),
            "ingress_kind": pa.array(kind, pa.string()),
        }
    )


def mark(app: str, batch: int, coverage: Coverage | None) -> TableMark:
    metadata = {MARK_APP_ID: app, MARK_BATCH_ID: batch, **(coverage.metadata() if coverage else {})}
    return TableMark.of(metadata)


def test_merged_takes_each_partitions_largest_offset() -> None:
    assert merged({"h": {0: 3, 1: 9}}, {"h": {0: 5}, "o": {0: 1}}, {}) == {
        "h": {0: 5, 1: 9},
        "o": {0: 1},
    }


def test_ends_of_a_batch_are_one_past_its_last_record_per_partition() -> None:
    batch = records(
        ("h", 0, 10, None, "half"), ("h", 0, 12, "bad", "half"), ("o", 1, 4, None, "op")
    )
    assert ends_of(batch) == {"h": {0: 13}, "o": {1: 5}}
    assert ends_of(records()) == {}


def test_a_commits_coverage_round_trips_with_before_only_where_the_batch_moved() -> None:
    coverage = Coverage(before={"h": {0: 10, 1: 7}}, after={"h": {0: 13, 1: 7}, "o": {0: 2}})
    recorded = coverage.metadata()
    assert recorded["txcoord_ingress"]["before"] == {"h": {"0": 10}, "o": {"0": 0}}
    assert Coverage.of_mark(recorded) == coverage
    assert Coverage.of_mark({MARK_APP_ID: "a", MARK_BATCH_ID: 1}) is None  # an older commit
    assert Coverage.of_mark({"txcoord_ingress": "garbage"}) is None


def test_the_writer_chains_its_batches_and_starts_where_the_tables_say() -> None:
    first = Coverage(before={"h": {0: 5}}, after={"h": {0: 9}, "o": {0: 3}})
    # A start: half_messages and quarantine committed batch 4, op_records not (a crash).
    marks = {
        HALVES: mark("app", 4, first),
        OPS: mark("app", 3, None),
        REFUSED: mark("app", 4, first),
    }
    nothing = lambda: {}  # noqa: E731 - no table lacks coverage here

    replay = CoverageKeeper("app")
    replay.marks.update(marks)
    again = replay.of_batch(4, records(("o", 0, 2, None, "op")), nothing)
    assert again == Coverage(before={"h": {0: 5}}, after={"h": {0: 9}, "o": {0: 3}})

    later = CoverageKeeper("app")
    later.marks.update(marks)
    fifth = later.of_batch(5, records(("h", 0, 11, None, "half")), nothing)
    assert fifth == Coverage(before={"h": {0: 9}, "o": {0: 3}}, after={"h": {0: 12}, "o": {0: 3}})
    later.landed(fifth)
    sixth = later.of_batch(6, records(("o", 1, 0, "bad", "op")), nothing)
    assert sixth.before == fifth.after
    assert sixth.after == {"h": {0: 12}, "o": {0: 3, 1: 1}}

    other_app = CoverageKeeper("new-app")  # a new checkpoint after a rebuild's repair
    other_app.marks.update(marks)
    assert other_app.of_batch(0, records(), nothing).before == first.after

    told = CoverageKeeper("repair", start={"h": {0: 5}})
    told.marks.update(marks)
    assert told.of_batch(0, records(("h", 0, 6, None, "half")), nothing) == Coverage(
        before={"h": {0: 5}}, after=first.after
    )

    unknown = CoverageKeeper("app")  # no table's newest mark has coverage (an upgrade)
    unknown.marks.update({HALVES: mark("app", 3, None), OPS: TableMark.of(None)})
    asked: list[int] = []

    def by_rows() -> dict[str, dict[int, int]]:
        asked.append(1)
        return {"h": {0: 40}}

    assert unknown.of_batch(4, records(), by_rows).before == {"h": {0: 40}}
    assert unknown.of_batch(5, records(), by_rows).before == {"h": {0: 40}}  # heartbeats
    assert asked == [1]  # the tables' rows are read once, not at every batch


def test_a_rebuild_reads_the_newest_batch_again_and_lands_what_its_table_lacks() -> None:
    """The issue's case: quarantine committed the batch (offset 11), half_messages did not
    (offset 10); op_records had nothing in it."""
    before, after = {"h": {0: 10}, "o": {0: 4}}, {"h": {0: 12}, "o": {0: 4}}
    older = Coverage(before={"h": {0: 8}, "o": {0: 2}}, after=before)
    marks = {
        HALVES: mark("app", 6, older),
        OPS: mark("app", 5, Coverage(before={"h": {0: 8}}, after={"h": {0: 8}, "o": {0: 4}})),
        REFUSED: mark("app", 7, Coverage(before, after)),
    }
    repair = repair_of(marks, {}, {"h": [0, 1], "o": [0, 1]})
    assert repair.begun == before
    assert repair.gap == {"h": {0: 12}}  # op topic: nothing read since
    assert repair.resume == after
    read = records(("h", 0, 10, None, "half"), ("h", 0, 11, "bad", "half"))
    assert unlanded(read, repair.held)["source_offset"].to_pylist() == [10]


def test_a_topic_gone_is_not_read_and_without_any_coverage_the_old_rule_holds() -> None:
    coverage = Coverage(before={"gone": {0: 1}, "h": {0: 1}}, after={"gone": {0: 3}, "h": {0: 2}})
    repair = repair_of({HALVES: mark("app", 1, coverage)}, {}, {"h": [0]})
    assert repair.gap == {"h": {0: 2}}
    old = repair_of(
        {HALVES: mark("app", 1, None)}, {HALVES: {"h": {0: 7}}, REFUSED: {}}, {"h": [0]}
    )
    assert (old.gap, old.resume) == ({}, {"h": {0: 7}})
    # A table without coverage (older commits) counts by its rows.
    mixed = repair_of(
        {HALVES: mark("app", 1, coverage), REFUSED: mark("app", 0, None)},
        {REFUSED: {"h": {0: 1}}},
        {"h": [0]},
    )
    read = records(("h", 0, 1, "bad", "half"), ("h", 0, 1, None, "half"))
    assert unlanded(read, mixed.held)["reason"].to_pylist() == ["bad"]


def test_a_batch_whose_decisions_committed_and_no_landing_is_read_again() -> None:
    """The landing runs beside the decisions: a crash may leave a delivery of batch 5 and no
    landing commit of it. The decisions carry the batch's coverage of what it read."""
    fourth = Coverage(before={"h": {0: 3}}, after={"h": {0: 6}, "o": {0: 2}})
    fifth = Coverage(before=fourth.after, after={"h": {0: 9}, "o": {0: 2}, "o2": {1: 4}})
    decided = fifth.moved()
    assert decided == Coverage(before={"h": {0: 6}}, after={"h": {0: 9}, "o2": {1: 4}})
    assert Coverage.of_mark(decided.metadata()) == decided
    marks = {HALVES: mark("app", 4, fourth), OPS: mark("app", 4, fourth)}
    alone = repair_of(marks, {}, {"h": [0], "o": [0], "o2": [0, 1]})
    assert alone.gap == fourth.after  # batch 4 again: nothing new to find
    repair = repair_of(marks, {}, {"h": [0], "o": [0], "o2": [0, 1]}, [decided])
    assert repair.begun == {"h": {0: 6}}  # "o": from its start, all of it held
    assert repair.gap == {"h": {0: 9}, "o": {0: 2}, "o2": {1: 4}}
    assert repair.resume == fifth.after
    assert repair.held[HALVES] == fourth.after  # every record of batch 5 lands
