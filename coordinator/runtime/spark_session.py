"""The one SparkSession factory, shared by the coordinator, the CLI and the tests.

Every session txcoord makes has:

- Delta Lake's SQL extension and catalog;
- the RocksDB state store, with changelog checkpointing (a micro-batch uploads only the
  changed keys, so checkpoint cost follows the batch rather than the whole state);
- few shuffle partitions: stateful operators keep one state store per partition, and
  on a 2-core box dozens of near-empty partitions cost more than they parallelise
  (the number is fixed in a query's checkpoint once it starts, so choose it up front);
- no web UI, UTC session time, the driver bound to loopback when running locally;
- with a local warehouse, renames done in-process rather than through a forked
  `readlink` (LOCAL_FILESYSTEM_CONF), and on a local master permissions too rather than
  through a forked `chmod` (LOCAL_FILESYSTEM);
- on a local master, the connector jars and the coordinator's stateful stage (compiled
  from streams/jvm/) from the install step's cache as `spark.jars`, so no session ever
  resolves packages over the network, and the driver's JVM started from the install step's
  class archive (coordinator/runtime/class_archives.py) when there is one;
- for a streaming application (`cancel_jobs_on_sigint=False`), the SIGINT handler it had:
  PySpark's SparkContext installs one that cancels every running job, which fails the
  micro-batches in flight (job-abort errors) before the application can stop its queries
  in order (coordinator/runtime/engine.py).

On a cluster (`spark-submit --master spark://…`), pass the same jars with `--jars`
and set `use_cached_jars=False`.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from coordinator.runtime import class_archives
from coordinator.runtime.artifacts import jars
from delta_tables.object_store import S3_SCHEMES

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: The local filesystem that sets permissions in-process (streams/jvm/txcoord/
#: LocalFileSystem.java): Hadoop's forks `chmod` for every file it creates, dozens of times
#: per micro-batch. Set on a local master with a local warehouse.
LOCAL_FILESYSTEM = "txcoord.LocalFileSystem"

#: On a local filesystem, rename in-process. Hadoop's FileContext.rename (Spark's default
#: checkpoint manager, and Delta's HDFSLogStore) asks RawLocalFileSystem for the link status
#: of the target, which forks `readlink` (FileUtil.readLink) on every call: every state-store
#: changelog, offset and commit file of every batch, and every Delta commit, paid a process
#: fork. FileSystem.rename is a plain POSIX rename. The Delta log store keeps its
#: no-overwrite check (LocalLogStore), as HDFSLogStore did on a local disk.
LOCAL_FILESYSTEM_CONF: Mapping[str, str] = {
    "spark.sql.streaming.checkpointFileManagerClass": (
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager"
    ),
    "spark.delta.logStore.file.impl": "io.delta.storage.LocalLogStore",
}


def s3a_conf(environ: Mapping[str, str]) -> dict[str, str]:
    """Return Spark's s3a settings for the S3 API the standard AWS_* variables name.

    The driver's delta-rs writes read the same variables (AWS_ENDPOINT_URL, AWS_REGION,
    AWS_ACCESS_KEY_ID...), so one environment points both writers at one store. s3a's
    default credential chain reads the keys from the environment itself; the endpoint and
    region it needs spelled out. An endpoint of its own (not AWS) is addressed by path
    (bucket in the path, not the host name): S3 API servers on a host name without
    wildcard DNS need it, AWS accepts it.
    """
    conf: dict[str, str] = {}
    region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION")
    if region:
        conf["spark.hadoop.fs.s3a.endpoint.region"] = region
    endpoint = environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        conf["spark.hadoop.fs.s3a.endpoint"] = endpoint
        conf["spark.hadoop.fs.s3a.path.style.access"] = "true"
        conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] = str(
            endpoint.startswith("https:")
        ).lower()
    return conf


#: Batches between two snapshots of the stage's RocksDB state (changelogs in between).
SNAPSHOT_EVERY_BATCHES = 50


#: HotSpot leaves any method of more than 8,000 bytes of bytecode to the interpreter. The
#: code Spark generates to turn the stateful stage's output rows (tens of columns) into
#: Spark's own rows is such a method, and a profile of a burst found the executors spending
#: much of their time in it, interpreted (docs/performance.md, decisions).
JIT_OPTIONS = "-XX:-DontCompileHugeMethods"


@dataclass(frozen=True)
class SparkSettings:
    """How to build a SparkSession; validated when constructed."""

    app_name: str = "txcoord"
    master: str | None = "local[2]"  # None: the master spark-submit was given
    warehouse: str = "warehouse"  # a local folder, or any Hadoop URI (s3a://bucket/path)
    shuffle_partitions: int = 2
    driver_memory: str = "4g"
    use_cached_jars: bool = True
    jar_cache_dir: Path | None = None
    extra_conf: Mapping[str, str] = field(default_factory=dict)
    cancel_jobs_on_sigint: bool = True  # PySpark's Ctrl-C; False: the application's own
    # A local driver writes the classes it loaded to this archive when its JVM exits
    # (coordinator/record_classes.py) instead of starting from the archive.
    record_classes: Path | None = None

    def __post_init__(self) -> None:
        if self.shuffle_partitions < 1:
            raise ValueError(f"shuffle_partitions must be >= 1, not {self.shuffle_partitions}")
        if not self.app_name:
            raise ValueError("app_name must not be empty")

    @property
    def is_local(self) -> bool:
        """Return True when this process sets a local master itself."""
        return self.master is not None and self.master.startswith("local")

    def conf(self) -> dict[str, str]:
        """Return the complete Spark configuration these settings stand for."""
        local = "://" not in self.warehouse
        warehouse = str(Path(self.warehouse).resolve()) if local else self.warehouse
        conf = {
            "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
            "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
            "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
            # A state snapshot flushes RocksDB's memtable to a new file; every few files
            # RocksDB compacts them into the rest of the state, rewriting it. At Spark's
            # default (a snapshot every 10 batches) that compaction was a visible share of
            # the Spark JVM's CPU in the bench (docs/performance.md, decisions). Recovery
            # replays at most this many batches' changelogs after the last snapshot.
            "spark.sql.streaming.stateStore.minDeltasForSnapshot": str(SNAPSHOT_EVERY_BATCHES),
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.default.parallelism": str(self.shuffle_partitions),
            # Delta reads its log with this many partitions; the default of 50 is built for
            # clusters and makes every snapshot on a laptop pay for 50 tiny tasks.
            "spark.databricks.delta.snapshotPartitions": str(self.shuffle_partitions),
            # Auto compaction runs after every commit and first scans the table's file list
            # for small files: a Spark job that more than doubles the cost of each small
            # append on the coordinator's path. Tables created before carry the
            # property; this turns it off for them too. The engine compacts off the batch
            # path instead (streams/writes/compactor.py).
            "spark.databricks.delta.autoCompact.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            # Bad input must become a row with a reason, never an exception that stops a
            # stream: a map built from repeated keys keeps the last value.
            "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
            "spark.sql.warehouse.dir": warehouse,
            "spark.sql.execution.arrow.pyspark.enabled": "true",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.memory": self.driver_memory,
        }
        if local:
            conf.update(LOCAL_FILESYSTEM_CONF)
        if self.is_local:
            conf["spark.driver.host"] = "127.0.0.1"
            conf["spark.driver.bindAddress"] = "127.0.0.1"
            log4j = Path(__file__).with_name("spark-log4j2.properties")
            archive = class_archives.options(
                class_archives.SPARK_DRIVER, self.jar_cache_dir, self.record_classes
            )
            conf["spark.driver.extraJavaOptions"] = " ".join(
                [f"-Dlog4j2.configurationFile=file:{log4j}", JIT_OPTIONS, *archive]
            )
        conf["spark.executor.extraJavaOptions"] = JIT_OPTIONS
        on_s3 = warehouse.startswith(S3_SCHEMES)
        if on_s3:
            conf.update(s3a_conf(os.environ))
        if self.use_cached_jars:
            stage = jars("stage", self.jar_cache_dir)
            spark_jars = (*jars("spark", self.jar_cache_dir), *stage)
            conf["spark.jars"] = ",".join(str(path) for path in spark_jars)
            # On the JVM's own class path: Hadoop loads file systems before spark.jars. Real
            # paths: a class archive fits only the class path it was recorded with
            # (coordinator/runtime/class_archives.py), and a checkout whose cache is a symbolic
            # link to another's is then the same class path. So every local session has the
            # same one, the stage then s3a (deploy/jvm/s3a.pom.xml), whatever its warehouse:
            # the session the archive is recorded from too, and deploy/submit-coordinator.
            if self.is_local:
                class_path = (*stage, *jars("s3", self.jar_cache_dir))
                conf["spark.driver.extraClassPath"] = ":".join(
                    str(path.resolve()) for path in class_path
                )
            if local and self.is_local:
                conf["spark.hadoop.fs.file.impl"] = LOCAL_FILESYSTEM
        conf.update(self.extra_conf)
        return conf


def build_spark_session(settings: SparkSettings | None = None) -> SparkSession:
    """Return a SparkSession configured for txcoord (creating its JVM when needed)."""
    settings = settings or SparkSettings()
    # Executors (python workers) must run this interpreter, the one with our packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if settings.is_local:
        # Keep Spark on loopback (and quiet about the host name resolving to it).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(settings.app_name)
    if settings.master is not None:
        builder = builder.master(settings.master)
    for key, value in settings.conf().items():
        builder = builder.config(key, value)
    keep_handler = (
        not settings.cancel_jobs_on_sigint and threading.current_thread() is threading.main_thread()
    )
    handler = signal.getsignal(signal.SIGINT)
    session = builder.getOrCreate()
    if keep_handler and handler is not None:
        signal.signal(signal.SIGINT, handler)
    return session
