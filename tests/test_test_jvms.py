"""What the suite gives the JVMs it starts (tests/conftest.py): a scratch folder of the run's
own (abandoned ones are swept) and room for compiled code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tests.conftest import JVM_SCRATCH, TEST_JVM_OPTIONS, TEST_SPARK_JVM_OPTIONS
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


def test_the_session_jvm_has_room_for_its_compiled_code(spark: SparkSession) -> None:
    """C1 alone would get a 48 MiB code cache, which a worker's session JVM outgrew."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    management = jvm.java.lang.management.ManagementFactory
    bean = jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean")
    hotspot = management.getPlatformMXBean(bean)
    size = int(hotspot.getVMOption("ReservedCodeCacheSize").getValue())
    assert size == 240 * 2**20, TEST_JVM_OPTIONS
    assert hotspot.getVMOption("TieredStopAtLevel").getValue() == "1"


def test_the_session_jvm_collects_with_the_serial_collector(spark: SparkSession) -> None:
    """G1's concurrent threads cost the busy suite CPU (tests/conftest.py)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    collectors = [
        bean.getName()
        for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    ]
    assert collectors == ["Copy", "MarkSweepCompact"], (collectors, TEST_SPARK_JVM_OPTIONS)
