"""bench/profile_jvm.py's summary: which step a sample is charged to (pure logic)."""

from __future__ import annotations

from pathlib import Path

from tests.bench_scripts import load_script

TASK = (
    "[Executor task launch worker for task 1.0 in stage 3.0 (TID 7) tid=42];"
    "org/apache/spark/executor/Executor$TaskRunner.run"
)
# The same pooled thread, named between tasks when the profile was dumped.
IDLE_TASK = "[Executor task idle worker#3 tid=43];org/apache/spark/executor/Executor$TaskRunner.run"
ARROW_JOB = "org/apache/spark/sql/execution/arrow/ArrowConverters$ArrowBatchIterator.next"


def test_samples_go_to_the_first_matching_step_and_other_threads_by_name(tmp_path: Path) -> None:
    stacks = tmp_path / "spark.collapsed"
    stacks.write_text(
        "\n".join(
            [
                # the stage's state work, driven by the Arrow job: charged to the state store
                f"{TASK};{ARROW_JOB};txcoord/TransactionProcessor.save;"
                "org/apache/spark/sql/execution/streaming/state/TimerStateImpl.registerTimer;"
                "org/apache/spark/sql/execution/streaming/state/RocksDB.handleMetricsUpdate 6",
                f"{TASK};{ARROW_JOB};org/apache/spark/sql/execution/arrow/ArrowWriter.write 3",
                f"{IDLE_TASK};java/lang/Thread.run;SomethingElse.run 1",
                "[rocksdb:low tid=9];rocksdb::DBImpl::BackgroundCallCompaction 2",
                "[C2 CompilerThread0 tid=5];Compile::Compile 8",
            ]
        )
    )
    summary = load_script("profile_jvm").summarize(stacks)
    assert summary.startswith("20 samples")
    assert "| executor tasks | 50.0% |" in summary
    assert "| JIT compilers | 40.0% |" in summary
    assert "| RocksDB background (compaction, flush) | 10.0% |" in summary
    assert "| stage: state store (RocksDB, timers, state encoders) | 60.0% | 30.0% |" in summary
    assert "| collect: rows to Arrow | 30.0% | 15.0% |" in summary
    assert "| other task work | 10.0% | 5.0% |" in summary
    assert "| RocksDB row-count tracking (a get per put and remove) | 30.0% |" in summary
    assert "| timer registration (an existence get, two puts) | 30.0% |" in summary


def test_an_empty_profile_says_so(tmp_path: Path) -> None:
    stacks = tmp_path / "empty.collapsed"
    stacks.write_text("")
    assert load_script("profile_jvm").summarize(stacks) == "no samples"
