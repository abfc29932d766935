"""The install step's jar cache is found, and its absence is explained."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from coordinator.core.errors import ArtifactsMissingError
from coordinator.runtime.artifacts import JAR_CACHE_ENV, PROJECT_ROOT, jar_cache_dir, jars


def test_cache_defaults_to_the_checkout_and_honours_the_environment(tmp_path: Path) -> None:
    assert jar_cache_dir({}) == PROJECT_ROOT / ".cache" / "jars"
    assert jar_cache_dir({JAR_CACHE_ENV: str(tmp_path)}) == tmp_path


def test_the_process_environment_is_read_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`jars()` (the Spark session's and the broker's) follows TXCOORD_JAR_CACHE by itself."""
    monkeypatch.setenv(JAR_CACHE_ENV, str(tmp_path))
    assert jar_cache_dir() == tmp_path
    (tmp_path / "stage").mkdir()
    (tmp_path / "stage" / "txcoord-stage.jar").touch()
    assert jars("stage") == (tmp_path / "stage" / "txcoord-stage.jar",)


def test_missing_jars_name_the_folder_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ArtifactsMissingError, match=r"make install.*TXCOORD_JAR_CACHE"):
        jars("kafka", tmp_path)


def test_unknown_component_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one of spark, kafka, stage, s3"):
        jars("flink", tmp_path)


def test_jars_are_listed_sorted(tmp_path: Path) -> None:
    (tmp_path / "spark").mkdir()
    for name in ("b.jar", "a.jar", "notes.txt"):
        (tmp_path / "spark" / name).touch()
    assert [p.name for p in jars("spark", tmp_path)] == ["a.jar", "b.jar"]


def test_installed_cache_holds_both_components() -> None:
    """The install step ran: Delta, the Kafka connector and the broker are all there."""
    spark_jars = {p.name for p in jars("spark")}
    kafka_jars = {p.name for p in jars("kafka")}
    assert any(n.startswith("delta-spark_4.2_2.13-") for n in spark_jars), spark_jars
    assert any(n.startswith("spark-sql-kafka-0-10_2.13-4.2.0") for n in spark_jars), spark_jars
    assert any(re.fullmatch(r"kafka_2\.13-4\.1\.\d+\.jar", n) for n in kafka_jars), kafka_jars
    assert any(n.startswith("log4j-slf4j-impl-") for n in kafka_jars), kafka_jars
    # The coordinator's stage, compiled from streams/jvm/ by the install step.
    assert [p.name for p in jars("stage")] == ["txcoord-stage.jar"]


def test_jvm_versions_agree_with_pyproject() -> None:
    """delta-spark's Python package and its Maven artifact carry one version; so do Spark's."""
    project = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["project"]
    engine = project["optional-dependencies"]["engine"]  # pyspark and delta-spark live there
    pins = dict(dep.split("==") for dep in [*project["dependencies"], *engine] if "==" in dep)
    pom = (PROJECT_ROOT / "deploy" / "jvm" / "spark-connectors.pom.xml").read_text()
    assert f"<delta.version>{pins['delta-spark']}</delta.version>" in pom
    assert f"<spark.version>{pins['pyspark']}</spark.version>" in pom
    spark_minor = ".".join(pins["pyspark"].split(".")[:2])
    assert f"delta-spark_{spark_minor}_2.13" in pom
