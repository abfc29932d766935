"""The class archives: options (pure), and the real session's and broker's JVMs using them."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from coordinator.runtime import class_archives
from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from coordinator.runtime.spark_session import SparkSettings
from tests.class_archive_check import assert_starts_from_archive


def jar_cache(root: Path) -> Path:
    for folder, jar in (("spark", "delta.jar"), ("stage", "txcoord-stage.jar"), ("s3", "s3a.jar")):
        (root / folder).mkdir(parents=True)
        (root / folder / jar).touch()
    return root


def driver_options(cache: Path, **settings: object) -> list[str]:
    conf = SparkSettings(warehouse=str(cache / "wh"), jar_cache_dir=cache, **settings).conf()
    return conf["spark.driver.extraJavaOptions"].split()


def test_no_archive_no_option(tmp_path: Path) -> None:
    assert class_archives.use_options(class_archives.SPARK_DRIVER, tmp_path) == []
    assert not any("Archive" in o for o in driver_options(jar_cache(tmp_path)))


def test_a_recorded_archive_is_used_quietly(tmp_path: Path) -> None:
    cache = jar_cache(tmp_path)
    archive = class_archives.archive(class_archives.SPARK_DRIVER, cache)
    archive.parent.mkdir()
    archive.touch()
    options = driver_options(cache)
    assert f"-XX:SharedArchiveFile={archive}" in options
    assert class_archives.QUIET in options
    # Executors run elsewhere, with other class paths: never given the driver's archive.
    conf = SparkSettings(warehouse=str(cache / "wh"), jar_cache_dir=cache).conf()
    assert "Archive" not in conf["spark.executor.extraJavaOptions"]


def test_recording_replaces_using(tmp_path: Path) -> None:
    cache = jar_cache(tmp_path)
    archive = class_archives.archive(class_archives.SPARK_DRIVER, cache)
    archive.parent.mkdir()
    archive.touch()  # an old archive is not used while recording
    options = driver_options(cache, record_classes=tmp_path / "new.jsa")
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}" in options
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in options)


def test_the_broker_starts_from_its_archive_or_records_it(tmp_path: Path) -> None:
    archive = class_archives.archive(class_archives.KAFKA_BROKER, tmp_path)
    archive.parent.mkdir()
    archive.touch()
    using = KafkaBroker(BrokerSettings(tmp_path / "b", jar_cache_dir=tmp_path))._java("cp")
    assert f"-XX:SharedArchiveFile={archive}" in using
    recording = KafkaBroker(
        BrokerSettings(tmp_path / "b", jar_cache_dir=tmp_path, record_classes=tmp_path / "n.jsa")
    )._java("cp")
    assert f"-XX:ArchiveClassesAtExit={tmp_path / 'n.jsa'}" in recording
    assert not any(o.startswith("-XX:SharedArchiveFile") for o in recording)


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="spark-driver"):
        class_archives.archive("executor")


@pytest.mark.spark
def test_the_sessions_driver_starts_from_the_recorded_archive(spark: SparkSession) -> None:
    process = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
    assert_starts_from_archive(process.pid, class_archives.SPARK_DRIVER)


@pytest.mark.kafka
def test_the_broker_starts_from_the_recorded_archive(kafka_broker: KafkaBroker) -> None:
    pid = kafka_broker.info.pid
    assert pid is not None
    assert_starts_from_archive(pid, class_archives.KAFKA_BROKER)


def test_a_cache_reached_through_a_link_gives_the_same_class_path(tmp_path: Path) -> None:
    """An archive fits one class path: a checkout whose .cache links to another's (as the
    README test's fresh copy does) puts the real paths on it, so both use one archive."""
    real = jar_cache(tmp_path / "real")
    (tmp_path / "link").symlink_to(real)
    by_link = SparkSettings(warehouse=str(tmp_path / "wh"), jar_cache_dir=tmp_path / "link")
    by_real = SparkSettings(warehouse=str(tmp_path / "wh"), jar_cache_dir=real)
    key = "spark.driver.extraClassPath"
    expected = f"{real / 'stage' / 'txcoord-stage.jar'}:{real / 's3' / 's3a.jar'}"
    assert by_link.conf()[key] == by_real.conf()[key] == expected
