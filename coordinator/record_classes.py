"""Record the class archives of the local stack's JVMs: one short run of the real stack.

    python -m coordinator.record_classes     (deploy/install.sh runs this)

A broker and a local Spark session start with `-XX:ArchiveClassesAtExit`, the engine starts
on them, one transaction is sent with the SDK over Kafka and read back from its topic table
once delivered, and everything stops in order. Each JVM writes the classes it loaded when it
exits; the archives replace the old ones only once both are written, so a failed run leaves
none (and the JVMs start as they would without). What an archive is and how it is used:
coordinator/runtime/class_archives.py.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import SparkSession

from coordinator.core.config import Config, load_config
from coordinator.runtime import class_archives
from coordinator.runtime.artifacts import jar_cache_dir
from coordinator.runtime.engine import Engine
from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from coordinator.runtime.spark_session import SparkSettings, build_spark_session
from coordinator.sdk import (
    CheckRequest,
    LocalTransactionState,
    Message,
    TransactionListener,
    TransactionProducer,
)

TOPIC = "ClassArchive"
#: Seconds for the one transaction to be delivered (the first batches compile their code).
DELIVERY_BOUND = 180.0
#: Seconds for the Spark JVM to write its archive and exit.
EXIT_BOUND = 300.0


class _Commit(TransactionListener):
    def execute_local_transaction(self, msg: Message, arg: object) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    def check_local_transaction(self, msg: CheckRequest) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE


def _deliver_one(spark: SparkSession, config: Config) -> None:
    """Send one committed transaction and wait until its topic table shows it."""
    producer = TransactionProducer(
        group="record-classes",
        listener=_Commit(),
        bootstrap_servers=config.kafka.bootstrap_servers,
    )
    producer.start()
    try:
        producer.send_message_in_transaction(Message(topic=TOPIC, body=b"classes"), arg=None)
    finally:
        producer.shutdown()
    table = f"{config.warehouse}/topics/{TOPIC}"
    deadline = time.monotonic() + DELIVERY_BOUND
    while time.monotonic() < deadline:
        # The table is created by the first delivery.
        if (Path(table) / "_delta_log").is_dir() and spark.read.format("delta").load(table).count():
            return
        time.sleep(1)
    raise TimeoutError(f"the transaction was not delivered to {table} in {DELIVERY_BOUND:.0f} s")


def _exit_jvm(spark: SparkSession) -> None:
    """Stop the session and its JVM, and wait until the JVM has exited (written its archive).

    PySpark's gateway JVM exits when its standard input closes (PythonGatewayServer).
    """
    spark.stop()
    gateway = SparkContext._gateway
    if gateway is None:
        return
    process = gateway.proc
    gateway.shutdown()
    SparkContext._gateway, SparkContext._jvm = None, None
    process.stdin.close()
    process.wait(EXIT_BOUND)


def record(cache_dir: Path | None = None) -> list[Path]:
    """Run the stack once and write both archives; return their paths."""
    cache = cache_dir or jar_cache_dir()
    finals = {name: class_archives.archive(name, cache) for name in class_archives.NAMES}
    news = {name: path.with_suffix(".new") for name, path in finals.items()}
    for path in [*finals.values(), *news.values()]:
        path.unlink(missing_ok=True)  # JVMs of this run must not start from an old one
    finals[class_archives.SPARK_DRIVER].parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="txcoord-classes-") as tmp:
        root = Path(tmp)
        broker = KafkaBroker(
            BrokerSettings(
                root / "kafka",
                jar_cache_dir=cache,
                record_classes=news[class_archives.KAFKA_BROKER],
            )
        )
        broker.start()
        try:
            config = load_config(
                overrides={
                    "warehouse": str(root / "warehouse"),
                    "kafka.bootstrap_servers": broker.bootstrap_servers,
                    "streams.checkpoint_dir": str(root / "checkpoints"),
                    "metrics.port": "0",
                }
            )
            spark = build_spark_session(
                SparkSettings(
                    app_name="txcoord-record-classes",
                    warehouse=config.warehouse,
                    shuffle_partitions=config.spark.shuffle_partitions,
                    driver_memory="1g",
                    jar_cache_dir=cache,
                    record_classes=news[class_archives.SPARK_DRIVER],
                )
            )
            try:
                engine = Engine(spark, config).start()
                try:
                    _deliver_one(spark, config)
                finally:
                    engine.stop()
            finally:
                _exit_jvm(spark)
        finally:
            broker.stop()
    missing = [str(path) for path in news.values() if not path.is_file()]
    if missing:
        raise RuntimeError(f"a JVM exited without writing its archive: {', '.join(missing)}")
    for name, path in news.items():
        path.replace(finals[name])
    return list(finals.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m coordinator.record_classes",
        description="Record the class archives the local stack's JVMs start from "
        "(coordinator/runtime/class_archives.py); run by deploy/install.sh.",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="the jar cache (default: .cache/jars, or TXCOORD_JAR_CACHE)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    started = time.monotonic()
    paths = record(args.cache_dir)
    sizes = ", ".join(f"{p.name} {p.stat().st_size / 2**20:.0f} MiB" for p in paths)
    print(f"class archives recorded in {time.monotonic() - started:.0f} s: {sizes}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
