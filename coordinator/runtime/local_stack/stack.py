"""The local stack behind `txcoord up`: broker, Spark, the engine's streams, the REST ingress.

Start order: the KRaft broker (probed with a real round trip), a local Spark session
(probed: Delta write + Kafka read), the engine (ticker, decision query; see
coordinator/runtime/engine.py), then the REST ingress on its own thread (an application above this
layer: the caller, `txcoord up`, hands in how to build its server). Stop order is the
reverse, and stopping is safe at any point of a failed start. Everything keeps its state
under the state folder and the warehouse, so the next `up` continues where this one stopped.

State folder layout::

    <state_dir>/kafka/        the broker's configuration, storage and logs
    <state_dir>/checkpoints/  the streams' checkpoints (unless streams.checkpoint_dir is set)
    <state_dir>/health/       scratch tables of the health probe

With `StackSettings.broker_auth` (the `[kafka]` part of `txcoord up --auth-file`) the broker
runs secured, with one topic set per producer group (`[kafka] topics_per_group`, core/
topics.py), and every client of the stack connects as the engine principal; the groups'
topics and the ACLs of coordinator/runtime/local_stack/broker_auth.py are created once the broker is
up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from coordinator.core.config import Config
from coordinator.core.errors import StackError
from coordinator.runtime.engine import Engine
from coordinator.runtime.local_stack.broker_auth import BrokerAuth, apply_auth
from coordinator.runtime.local_stack.health import Health, check_kafka, check_spark
from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from coordinator.runtime.spark_session import SparkSettings, build_spark_session
from streams.progress.tally import Counts
from streams.query.decision_query import QUERY_NAME as COORDINATOR_QUERY
from streams.query.decision_query import check_coordinator_state

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StackSettings:
    """Where the local stack keeps its state and how it runs."""

    state_dir: Path = Path("var")
    master: str = "local[2]"
    kafka_port: int = 0
    driver_memory: str = "4g"
    broker_auth: BrokerAuth | None = None  # None: the broker is open on loopback


class RestServer(Protocol):
    """What the stack needs of the REST ingress's server (a uvicorn.Server)."""

    started: bool
    should_exit: bool

    def run(self) -> None:
        """Serve until `should_exit` is set."""


class GrpcEndpoint(Protocol):
    """What the stack needs of the RocketMQ gRPC endpoint (coordinator/rocketmq/server.py)."""

    @property
    def address(self) -> str:
        """Return `host:port` once started."""

    def start(self) -> object:
        """Listen; raise if it cannot."""

    def stop(self) -> None:
        """Stop listening and close its clients."""


@dataclass(frozen=True)
class Status:
    """What the status line shows."""

    counts: Counts
    input_lag: int
    rest_url: str | None


class LocalStack:
    """Start, probe, watch and stop the local components in order."""

    def __init__(
        self,
        settings: StackSettings,
        config: Config,
        rest_server: Callable[[Config], RestServer] | None = None,
        grpc_endpoint: Callable[[Config], GrpcEndpoint] | None = None,
    ) -> None:
        """`rest_server` builds the REST ingress's server from the final configuration; the
        stack runs no REST ingress without one. `grpc_endpoint` builds the RocketMQ gRPC
        endpoint alike."""
        self.settings = settings
        self.rest_server = rest_server
        self.grpc_endpoint = grpc_endpoint
        self._grpc: GrpcEndpoint | None = None
        self.config = config  # its bootstrap servers are the broker's once started
        self.broker = KafkaBroker(
            BrokerSettings(
                settings.state_dir / "kafka", port=settings.kafka_port, auth=settings.broker_auth
            )
        )
        self.spark: SparkSession | None = None
        self.engine: Engine | None = None
        self._server: RestServer | None = None
        self._server_thread: threading.Thread | None = None
        self._spark_health = Health("spark", False, "not started", 0.0)

    @property
    def rest_url(self) -> str | None:
        """Return the REST ingress's base URL once it serves."""
        if self._server is None:
            return None
        return f"http://{self.config.rest.host}:{self.config.rest.port}"

    def start(self) -> list[Health]:
        """Start every component and return their health; raise if one is unhealthy."""
        # A checkpoint this configuration cannot resume is refused before anything starts.
        check_coordinator_state(self.config)
        kafka = self.start_broker()
        spark = self.start_spark("txcoord-up")
        log.info("starting the decision query")
        started = time.monotonic()
        self.engine = Engine(spark, self.config).start()
        metrics = f"; metrics at {self.engine.metrics_url}" if self.engine.metrics_url else ""
        streams = Health(
            "streams", True, f"coordinator running{metrics}", time.monotonic() - started
        )
        healths = [kafka, self._spark_health, streams]
        if self.rest_server is not None:
            healths.append(self._start_rest(self.rest_server))
        if self.grpc_endpoint is not None:
            healths.append(self._start_grpc(self.grpc_endpoint))
        return healths

    @property
    def grpc_address(self) -> str | None:
        """Return the RocketMQ gRPC endpoint's `host:port` once it serves."""
        return None if self._grpc is None else self._grpc.address

    def _start_grpc(self, build: Callable[[Config], GrpcEndpoint]) -> Health:
        started = time.monotonic()
        endpoint = build(self.config)
        endpoint.start()  # ConfigurationError when the port is taken
        self._grpc = endpoint
        detail = f"RocketMQ gRPC endpoint at {endpoint.address}"
        return Health("grpc", True, detail, time.monotonic() - started)

    def start_broker(self) -> Health:
        """Start the broker (and its principals and ACLs); the configuration then names it."""
        log.info("starting kafka broker in %s", self.broker.data_dir)
        self.broker.start()
        security = self.broker.client_security
        kafka = check_kafka(self.broker.bootstrap_servers, security)
        if not kafka.healthy:
            raise StackError(str(kafka))
        secured = self.settings.broker_auth is not None
        self.config = replace(
            self.config,
            kafka=replace(
                self.config.kafka,
                bootstrap_servers=self.broker.bootstrap_servers,
                topics_per_group=secured or self.config.kafka.topics_per_group,
                **asdict(security),
            ),
        )
        if self.settings.broker_auth is not None:
            apply_auth(self.broker.bootstrap_servers, self.settings.broker_auth, self.config)
        return kafka

    def start_spark(self, app_name: str) -> SparkSession:
        """Start the Spark session (the broker started) and probe it; return it."""
        log.info("starting spark (%s)", self.settings.master)
        self.spark = build_spark_session(
            SparkSettings(
                app_name=app_name,
                master=self.settings.master,
                warehouse=self.config.warehouse,
                driver_memory=self.settings.driver_memory,
                shuffle_partitions=self.config.spark.shuffle_partitions,
                cancel_jobs_on_sigint=False,  # `txcoord up` stops the streams in order
            )
        )
        spark = check_spark(
            self.spark,
            self.settings.state_dir / "health",
            self.broker.bootstrap_servers,
            self.broker.client_security,
        )
        if not spark.healthy:
            raise StackError(str(spark))
        self._spark_health = spark
        return self.spark

    def _start_rest(self, build_server: Callable[[Config], RestServer]) -> Health:
        started = time.monotonic()
        server = build_server(self.config)
        thread = threading.Thread(target=server.run, name="txcoord-rest", daemon=True)
        thread.start()
        self._server, self._server_thread = server, thread
        for _ in range(200):
            if server.started or not thread.is_alive():
                break
            thread.join(0.1)
        if not server.started:
            raise StackError(
                f"the REST ingress did not start on {self.config.rest.host}:"
                f"{self.config.rest.port} (is the port taken? use --port)"
            )
        detail = f"{self.rest_url} (OpenAPI at /openapi.json)"
        return Health("rest", True, detail, time.monotonic() - started)

    def status(self) -> Status:
        """Return the current counts, input lag and REST address."""
        if self.engine is None:
            return Status(Counts(), 0, self.rest_url)
        query = self.engine.progress.last.get(COORDINATOR_QUERY, {})
        return Status(self.engine.tally.snapshot(), int(query.get("lag") or 0), self.rest_url)

    def problems(self) -> list[str]:
        """Return what is wrong with the running stack right now (empty when all is well)."""
        found = []
        if not self.broker.is_running():
            found.append(f"kafka broker has stopped; see {self.broker.log_dir / 'server.log'}")
        if self.spark is not None and self.spark.sparkContext._jsc is None:
            found.append("spark session has stopped")
        if self.engine is not None:
            found += self.engine.problems()
        if self._server_thread is not None and not self._server_thread.is_alive():
            found.append("the REST ingress has stopped")
        return found

    def stop(self, hurry: threading.Event | None = None) -> None:
        """Stop the REST ingress, the streams, Spark, then the broker; safe more than once.

        The streams let their batches in flight finish unless `hurry` is set (see
        coordinator/runtime/engine.py).
        """
        grpc, self._grpc = self._grpc, None
        if grpc is not None:
            log.info("stopping the RocketMQ gRPC endpoint")
            grpc.stop()
        server, self._server = self._server, None
        if server is not None:
            log.info("stopping the REST ingress")
            server.should_exit = True
            if self._server_thread is not None:
                self._server_thread.join(15)
        engine, self.engine = self.engine, None
        if engine is not None:
            log.info("stopping the streams")
            try:
                engine.stop(hurry)
            except Exception as exc:  # the JVM may already be gone (e.g. killed with us)
                log.warning("the streams did not stop cleanly: %s", exc)
        spark, self.spark = self.spark, None
        if spark is not None:
            log.info("stopping spark")
            try:
                spark.stop()
            except Exception as exc:
                log.warning("spark did not stop cleanly: %s", exc)
        log.info("stopping kafka broker")
        self.broker.stop()
