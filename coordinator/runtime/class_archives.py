"""Class-data-sharing archives: the local stack's JVMs start from classes parsed once.

A Spark driver loads thousands of classes from hundreds of jars before its first batch, and
the broker too; finding, parsing and verifying them is a large part of a JVM's start. The
install step runs the local stack once with `-XX:ArchiveClassesAtExit`
(coordinator/record_classes.py) and keeps what the JVMs loaded as a dynamic CDS archive per
JVM kind, beside the jars it was made from::

    <jar cache>/cds/spark-driver.jsa   every local Spark driver (`txcoord up`, the CLI,
                                       `deploy/submit-coordinator`, notebooks, tests)
    <jar cache>/cds/kafka-broker.jsa   the local broker and its storage format tool

A JVM started with `-XX:SharedArchiveFile` maps the archive instead of parsing the jars.
HotSpot checks that the archive fits (same JDK build, the same class path with the same jar
sizes and times) and otherwise starts as it would have without one: an archive can make a
start slower never, and wrong never. Its complaints are silenced (`-Xlog:cds*=off`), so a
stale archive (a JDK upgrade) costs only the speed until the install step records again.
"""

from __future__ import annotations

from pathlib import Path

from coordinator.runtime.artifacts import jar_cache_dir

SPARK_DRIVER = "spark-driver"
KAFKA_BROKER = "kafka-broker"
NAMES = (SPARK_DRIVER, KAFKA_BROKER)

#: HotSpot's own messages about archives (one warning per start if an archive does not fit).
QUIET = "-Xlog:cds*=off"


def archive(name: str, cache_dir: Path | None = None) -> Path:
    """Return where the archive of JVM kind `name` is kept (it may not exist)."""
    if name not in NAMES:
        raise ValueError(f"name must be one of {', '.join(NAMES)}, not {name!r}")
    return (cache_dir or jar_cache_dir()) / "cds" / f"{name}.jsa"


def use_options(name: str, cache_dir: Path | None = None) -> list[str]:
    """Return the JVM options that start a JVM of kind `name` from its archive; none
    when the install step has not recorded one."""
    path = archive(name, cache_dir)
    return [f"-XX:SharedArchiveFile={path}", QUIET] if path.is_file() else []


def record_options(path: Path) -> list[str]:
    """Return the JVM options that write the classes a JVM loaded to `path` when it exits."""
    return [f"-XX:ArchiveClassesAtExit={path}", QUIET]


def options(name: str, cache_dir: Path | None = None, record: Path | None = None) -> list[str]:
    """Return the options of a JVM of kind `name`: record its classes to `record` when given
    (an old archive is then not used), else start from the recorded archive, if any."""
    return record_options(record) if record is not None else use_options(name, cache_dir)
