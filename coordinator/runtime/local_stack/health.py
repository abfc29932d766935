"""Health probes that do real work: a Kafka round trip and a Delta round trip through Spark.

An open port or a running JVM proves little; each probe here exercises the path the
product uses, so "healthy" means the broker stores and serves records, Spark's Kafka
connector reads them, and Delta Lake commits and reads a table.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kafka import KafkaProducer

from coordinator.core.kafka_security import KafkaSecurity
from coordinator.kafka_clients.admin import admin_client, ensure_topic
from coordinator.kafka_clients.options import kafka_python_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Topic the Kafka probes write to; one partition, short retention.
HEALTH_TOPIC = "txcoord.health"


@dataclass(frozen=True)
class Health:
    """Outcome of one probe."""

    component: str
    healthy: bool
    detail: str
    seconds: float

    def __str__(self) -> str:
        mark = "healthy" if self.healthy else "UNHEALTHY"
        return f"{self.component}: {mark} - {self.detail} ({self.seconds:.1f} s)"


def check_kafka(bootstrap_servers: str, security: KafkaSecurity | None = None) -> Health:
    """Return the broker's health: metadata answered and a record durably written (acks=all)."""
    started = time.monotonic()
    security = security or KafkaSecurity()
    try:
        with admin_client(bootstrap_servers, "txcoord-health", security) as admin:
            cluster: Any = admin.describe_cluster()
        ensure_topic(
            bootstrap_servers, HEALTH_TOPIC, 1, {"retention.ms": "3600000"}, security=security
        )
        producer = KafkaProducer(
            bootstrap_servers=bootstrap_servers, acks="all", **kafka_python_options(security)
        )
        try:
            producer.send(HEALTH_TOPIC, value=b"ping").get(timeout=15)
        finally:
            producer.close()
    except Exception as exc:  # a probe reports failures, it does not raise them
        return Health("kafka", False, f"{type(exc).__name__}: {exc}", time.monotonic() - started)
    brokers = len(cluster.get("brokers", []))
    detail = f"{bootstrap_servers}, cluster {cluster.get('cluster_id')}, {brokers} broker(s)"
    return Health("kafka", True, detail, time.monotonic() - started)


def check_spark(
    spark: SparkSession,
    scratch_dir: Path,
    bootstrap_servers: str | None,
    security: KafkaSecurity | None = None,
) -> Health:
    """Return Spark's health: a Delta write+read, and a Kafka read through the connector."""
    started = time.monotonic()
    try:
        table = scratch_dir / "delta-probe"
        token = uuid.uuid4().hex
        spark.createDataFrame([(token,)], "token string").write.format("delta").mode(
            "overwrite"
        ).save(str(table))
        read_back = spark.read.format("delta").load(str(table)).first()
        if read_back is None or read_back["token"] != token:
            raise RuntimeError(f"Delta table {table} did not return the row just written")
        checks = ["delta"]
        if bootstrap_servers is not None:
            records = (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap_servers)
                .options(**(security or KafkaSecurity()).spark_options())
                .option("subscribe", HEALTH_TOPIC)
                .load()
                .count()
            )
            if records < 1:
                raise RuntimeError(f"the Kafka connector read nothing from {HEALTH_TOPIC}")
            checks.append("kafka connector")
    except Exception as exc:  # a probe reports failures, it does not raise them
        return Health("spark", False, f"{type(exc).__name__}: {exc}", time.monotonic() - started)
    detail = f"Spark {spark.version} on {spark.sparkContext.master}, {' + '.join(checks)} ok"
    return Health("spark", True, detail, time.monotonic() - started)
