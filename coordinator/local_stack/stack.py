"""The local stack behind `txcoord up`: the KRaft broker and a local Spark session.

Start order is broker, then Spark (the health probe reads Kafka through Spark); stop order
is the reverse, and stopping is safe at any point of a failed start. Later components
(ingest, coordinator, REST ingress) join the same start/stop sequence.

State folder layout::

    <state_dir>/kafka/    the broker's configuration, storage and logs
    <state_dir>/health/   scratch tables of the health probe
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from coordinator.errors import StackError
from coordinator.local_stack.health import Health, check_kafka, check_spark
from coordinator.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from coordinator.spark_session import SparkSettings, build_spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StackSettings:
    """Where the local stack keeps its state and how it runs."""

    state_dir: Path = Path("var")
    warehouse: Path = Path("warehouse")
    master: str = "local[2]"
    kafka_port: int = 0
    driver_memory: str = "4g"


class LocalStack:
    """Start, probe and stop the local components in order."""

    def __init__(self, settings: StackSettings) -> None:
        self.settings = settings
        self.broker = KafkaBroker(
            BrokerSettings(settings.state_dir / "kafka", port=settings.kafka_port)
        )
        self.spark: SparkSession | None = None

    def start(self) -> list[Health]:
        """Start every component and return their health; raise if one is unhealthy."""
        log.info("starting kafka broker in %s", self.broker.data_dir)
        self.broker.start()
        kafka = check_kafka(self.broker.bootstrap_servers)
        if not kafka.healthy:
            raise StackError(str(kafka))
        log.info("starting spark (%s)", self.settings.master)
        self.spark = build_spark_session(
            SparkSettings(
                app_name="txcoord-up",
                master=self.settings.master,
                warehouse=str(self.settings.warehouse),
                driver_memory=self.settings.driver_memory,
            )
        )
        spark = check_spark(
            self.spark, self.settings.state_dir / "health", self.broker.bootstrap_servers
        )
        if not spark.healthy:
            raise StackError(str(spark))
        return [kafka, spark]

    def problems(self) -> list[str]:
        """Return what is wrong with the running stack right now (empty when all is well)."""
        found = []
        if not self.broker.is_running():
            found.append(f"kafka broker has stopped; see {self.broker.log_dir / 'server.log'}")
        if self.spark is not None and self.spark.sparkContext._jsc is None:
            found.append("spark session has stopped")
        return found

    def stop(self) -> None:
        """Stop Spark, then the broker; safe to call more than once."""
        spark, self.spark = self.spark, None
        if spark is not None:
            log.info("stopping spark")
            try:
                spark.stop()
            except Exception as exc:  # the JVM may already be gone (e.g. killed with us)
                log.warning("spark did not stop cleanly: %s", exc)
        log.info("stopping kafka broker")
        self.broker.stop()
