"""The run's JVM scratch folder: abandoned folders are swept, the JVMs really use it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tests.conftest import JVM_SCRATCH
from tests.jvm_scratch import PREFIX, owner_pid, sweep_abandoned

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def dead_pid() -> int:
    """Return the pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_folders_of_gone_processes_are_swept(tmp_path: Path) -> None:
    gone = tmp_path / f"{PREFIX}{dead_pid()}-abc"
    living = tmp_path / f"{PREFIX}{os.getpid()}-def"
    unnamed = tmp_path / f"{PREFIX}xyz"
    other = tmp_path / "spark-1234"
    for path in (gone, living, unnamed, other):
        (path / "inside").mkdir(parents=True)

    assert sweep_abandoned(tmp_path) == [gone]
    assert not gone.exists()
    assert living.exists() and unnamed.exists() and other.exists()
    assert owner_pid(living) == os.getpid() and owner_pid(unnamed) is None


def test_the_session_jvm_keeps_its_scratch_in_the_runs_folder(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    assert Path(jvm.java.lang.System.getProperty("java.io.tmpdir")) == JVM_SCRATCH
    local_dirs = jvm.org.apache.spark.util.Utils.getConfiguredLocalDirs(
        spark.sparkContext._jsc.sc().getConf()
    )
    assert [Path(path) for path in local_dirs] == [JVM_SCRATCH]
    spark_roots = list(JVM_SCRATCH.glob("spark-*"))
    assert spark_roots, f"no Spark local directory in {JVM_SCRATCH}"
