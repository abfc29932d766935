"""The SparkSession factory: configuration (pure) and a real session (integration)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator.runtime.spark_session import (
    JIT_OPTIONS,
    LOCAL_FILESYSTEM,
    LOCAL_FILESYSTEM_CONF,
    ROCKSDB_PROVIDER,
    SparkSettings,
)


def test_conf_carries_delta_rocksdb_and_cached_jars(tmp_path: Path) -> None:
    for folder, jar in (("spark", "delta.jar"), ("stage", "txcoord-stage.jar"), ("s3", "s3a.jar")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / jar).touch()
    conf = SparkSettings(warehouse=str(tmp_path / "wh"), jar_cache_dir=tmp_path).conf()
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"].endswith("DeltaCatalog")
    assert conf["spark.sql.streaming.stateStore.providerClass"] == ROCKSDB_PROVIDER
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.jars"] == (
        f"{tmp_path / 'spark' / 'delta.jar'},{tmp_path / 'stage' / 'txcoord-stage.jar'}"
    )
    assert conf["spark.sql.warehouse.dir"] == str((tmp_path / "wh").resolve())
    assert conf["spark.driver.bindAddress"] == "127.0.0.1"
    # The stage's jar on the JVM's class path: it serves file:// (txcoord.LocalFileSystem).
    # The stage, then s3a: the same class path for every local session (the class archive's).
    assert conf["spark.driver.extraClassPath"] == ":".join(
        str(tmp_path / path) for path in ("stage/txcoord-stage.jar", "s3/s3a.jar")
    )
    assert conf["spark.hadoop.fs.file.impl"] == LOCAL_FILESYSTEM
    assert conf["spark.driver.extraJavaOptions"].endswith(JIT_OPTIONS)
    assert conf["spark.executor.extraJavaOptions"] == JIT_OPTIONS


def test_cluster_settings_leave_jars_and_addresses_to_spark_submit() -> None:
    conf = SparkSettings(
        master="spark://10.0.0.1:7077", warehouse="s3a://lake/wh", use_cached_jars=False
    ).conf()
    assert "spark.jars" not in conf
    assert "spark.driver.bindAddress" not in conf
    assert "spark.hadoop.fs.file.impl" not in conf
    assert conf["spark.sql.warehouse.dir"] == "s3a://lake/wh"
    # An object store keeps Spark's and Delta's own choices (S3 needs its own log store).
    assert not LOCAL_FILESYSTEM_CONF.keys() & conf.keys()


def test_a_local_warehouse_renames_in_process(tmp_path: Path) -> None:
    conf = SparkSettings(warehouse=str(tmp_path / "wh"), use_cached_jars=False).conf()
    for key, value in LOCAL_FILESYSTEM_CONF.items():
        assert conf[key] == value
    assert conf["spark.delta.logStore.file.impl"] == "io.delta.storage.LocalLogStore"


def test_extra_conf_wins() -> None:
    conf = SparkSettings(use_cached_jars=False, extra_conf={"spark.sql.shuffle.partitions": "8"})
    assert conf.conf()["spark.sql.shuffle.partitions"] == "8"


def test_impossible_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="shuffle_partitions"):
        SparkSettings(shuffle_partitions=0)


@pytest.mark.spark
def test_session_has_delta_rocksdb_and_the_kafka_connector(spark: SparkSession) -> None:
    assert spark.version == "4.2.0"
    assert spark.conf.get("spark.sql.streaming.stateStore.providerClass") == ROCKSDB_PROVIDER
    jvm = spark.sparkContext._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    # Huge generated methods are compiled, not interpreted (JIT_OPTIONS says why).
    arguments = list(
        jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    )
    assert JIT_OPTIONS in arguments, arguments
    for cls in (
        "io.delta.tables.DeltaTable",
        "org.apache.spark.sql.kafka010.KafkaSourceProvider",
        "org.apache.kafka.clients.consumer.KafkaConsumer",
    ):
        assert loader.loadClass(cls) is not None


@pytest.mark.spark
def test_local_files_get_their_permissions_in_process(spark: SparkSession, tmp_path: Path) -> None:
    """txcoord.LocalFileSystem serves file:// and sets the very bits Hadoop's chmod would."""
    jvm = spark.sparkContext._jvm
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    path = jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}/a/b")
    fs = path.getFileSystem(hadoop)
    assert fs.getClass().getName() == LOCAL_FILESYSTEM
    permission = jvm.org.apache.hadoop.fs.permission.FsPermission
    assert fs.mkdirs(path, permission(0o750))
    for mode in (0o640, 0o604, 0o755, 0o000):
        file = jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}/a/b/f{mode:o}")
        fs.create(file, True).close()
        fs.setPermission(file, permission(mode))
        assert (tmp_path / "a" / "b" / f"f{mode:o}").stat().st_mode & 0o777 == mode
    assert (tmp_path / "a" / "b").stat().st_mode & 0o777 == 0o750
    # Created with Hadoop's default (0666 less the umask 022), checksum file beside it.
    fs.create(jvm.org.apache.hadoop.fs.Path(f"file://{tmp_path}/a/c"), True).close()
    assert (tmp_path / "a" / "c").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "a" / ".c.crc").exists()
