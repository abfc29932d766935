"""Locate the JVM artifacts that `deploy/install.sh` resolved from Maven Central.

The install step copies two closed sets of jars into the checkout's ignored
`.cache/jars/` folder:

- `spark/`: Delta Lake and Spark's Kafka connector with their own dependencies
  (Spark itself ships inside the pyspark wheel), handed to Spark as `spark.jars`
  so a session starts without any network access;
- `kafka/`: the Kafka broker and a log4j2 binding, the classpath of `kafka.Kafka`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from coordinator.core.errors import ArtifactsMissingError

#: Environment variable that points at a jar cache outside the checkout.
JAR_CACHE_ENV = "TXCOORD_JAR_CACHE"

#: The checkout this package was installed from (editable install).
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def jar_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return the folder holding `spark/` and `kafka/`, honouring `TXCOORD_JAR_CACHE`.

    `environ` defaults to this process's environment.
    """
    override = (os.environ if environ is None else environ).get(JAR_CACHE_ENV)
    return Path(override) if override else PROJECT_ROOT / ".cache" / "jars"


#: The folders of jars the install step fills (deploy/install.sh).
COMPONENTS = ("spark", "kafka", "stage", "s3", "rocketmq", "rocketmq-peer")


def jars(component: str, cache_dir: Path | None = None) -> tuple[Path, ...]:
    """Return the sorted jars of `component`, or explain how to get them.

    "spark": the connectors; "kafka": the broker; "stage": the coordinator's stateful stage,
    compiled from streams/jvm/ by the install step; "s3": Hadoop's s3a file system;
    "rocketmq": RocketMQ 5's Java client; "rocketmq-peer": the application of
    deploy/jvm/rocketmq-peer/, written with it (the gRPC endpoint's Java peer).
    """
    if component not in COMPONENTS:
        raise ValueError(f"component must be one of {', '.join(COMPONENTS)}, not {component!r}")
    folder = (cache_dir or jar_cache_dir()) / component
    found = tuple(sorted(folder.glob("*.jar")))
    if not found:
        raise ArtifactsMissingError(
            f"no {component} jars in {folder}: run `make install` (deploy/install.sh) to "
            f"resolve them from Maven Central, or point {JAR_CACHE_ENV} at a jar cache"
        )
    return found
