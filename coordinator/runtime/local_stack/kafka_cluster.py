"""A three-node KRaft cluster on 127.0.0.1: what a production Kafka looks like, on loopback.

Each node is a broker and a controller (KRaft's combined mode), run by kafka_broker.py from
the install step's jars; the three form one controller quorum, and every topic is made as
production makes it: three replicas, `min.insync.replicas` 2, so an `acks=all` write
survives the loss of any one node and a partition's leadership moves when its leader dies.

    <data_dir>/cluster.json   the cluster id and every node's ports (a restart keeps them)
    <data_dir>/node-<id>/     one broker's data folder (kafka_broker.py's layout)

The nodes are launched together and then waited for: a node serves metadata only once a
majority of the controllers has elected a leader, so no node can be ready alone. A node can
be killed (SIGKILL, as a crash) and started again on its own while the others serve.
"""

from __future__ import annotations

import contextlib
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from kafka.admin import KafkaAdminClient

from coordinator.core.errors import BrokerError
from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker, new_cluster_id
from coordinator.runtime.local_stack.ports import free_port

#: A node's settings beyond the single-node template's: replicated as in production.
REPLICATED = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "share.coordinator.state.topic.replication.factor": "3",
    "share.coordinator.state.topic.min.isr": "2",
    # Never elect a replica that missed acknowledged writes (Kafka's default, said aloud).
    "unclean.leader.election.enable": "false",
}


@dataclass(frozen=True)
class ClusterSettings:
    """Where and how to run the local cluster."""

    data_dir: Path
    nodes: int = 3
    # Three JVMs beside Spark on a small machine: half the single broker's heap each.
    heap: str = "512m"
    startup_timeout: float = 120.0

    def __post_init__(self) -> None:
        if self.nodes < 3 or self.nodes % 2 == 0:
            raise ValueError(f"a cluster needs an odd number of nodes, 3 or more, not {self.nodes}")


@dataclass(frozen=True)
class ClusterPlan:
    """The cluster id and each node's (port, controller port), kept in cluster.json."""

    cluster_id: str
    ports: tuple[tuple[int, int], ...]

    @property
    def voters(self) -> str:
        """Return `controller.quorum.voters` of every node."""
        return ",".join(
            f"{node}@127.0.0.1:{controller}" for node, (_, controller) in enumerate(self.ports, 1)
        )


def partition_of(topic: dict[str, Any], partition: int) -> dict[str, Any]:
    """Return one partition of a topic as kafka-python's admin describes it."""
    entries: list[dict[str, Any]] = topic["partitions"]
    for entry in entries:
        if entry["partition_index"] == partition:
            return entry
    raise ValueError(f"{topic.get('name')} has no partition {partition}")


class KafkaCluster:
    """A local KRaft cluster of `nodes` combined nodes; a context manager."""

    def __init__(self, settings: ClusterSettings) -> None:
        self.settings = settings
        self.plan = self._plan()
        self.nodes = [
            KafkaBroker(
                BrokerSettings(
                    data_dir=settings.data_dir / f"node-{node}",
                    port=port,
                    controller_port=controller,
                    heap=settings.heap,
                    cluster_id=self.plan.cluster_id,
                    startup_timeout=settings.startup_timeout,
                    extra_properties={
                        "node.id": str(node),
                        "controller.quorum.voters": self.plan.voters,
                        **REPLICATED,
                    },
                )
            )
            for node, (port, controller) in enumerate(self.plan.ports, 1)
        ]

    def _plan(self) -> ClusterPlan:
        path = self.settings.data_dir / "cluster.json"
        if path.exists():
            raw = json.loads(path.read_text())
            return ClusterPlan(raw["cluster_id"], tuple(tuple(p) for p in raw["ports"]))
        taken: set[int] = set()
        ports = []
        for _ in range(self.settings.nodes):
            pair = []
            for _ in range(2):
                port = free_port()
                while port in taken:
                    port = free_port()
                taken.add(port)
                pair.append(port)
            ports.append((pair[0], pair[1]))
        plan = ClusterPlan(new_cluster_id(), tuple(ports))
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"cluster_id": plan.cluster_id, "ports": plan.ports}) + "\n")
        return plan

    @property
    def bootstrap_servers(self) -> str:
        """Return every node's `host:port`, as clients are given them."""
        return ",".join(f"127.0.0.1:{port}" for port, _ in self.plan.ports)

    def start(self) -> KafkaCluster:
        """Launch every node, then wait until each serves metadata and every node is a
        registered broker of the cluster."""
        try:
            for node in self.nodes:
                node.launch()
            for node in self.nodes:
                node.wait_ready()
            self._wait_registered(len(self.nodes))
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_registered(self, count: int) -> None:
        """Wait until the cluster's metadata lists `count` brokers.

        A node serves metadata as soon as any broker is registered, its own registration
        (and unfencing by the controller) can come seconds later on a loaded machine: a topic
        of three replicas created in between is refused ("only 2 broker(s) are registered").
        """
        deadline = time.monotonic() + self.settings.startup_timeout
        listed = 0
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):  # a client error: not there yet
                admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap_servers, request_timeout_ms=5000
                )
                try:
                    listed = len(admin.describe_cluster()["brokers"])
                finally:
                    admin.close()
                if listed >= count:
                    return
            time.sleep(0.5)
        raise BrokerError(
            f"only {listed} of {count} brokers registered after "
            f"{self.settings.startup_timeout:.0f} s (logs under {self.settings.data_dir})"
        )

    def stop(self) -> None:
        """Stop every node (a controlled shutdown each), side by side: one after the other,
        each waited for the controller to move its leaderships, three took ~30 s."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            list(pool.map(KafkaBroker.stop, self.nodes))

    def kill(self, node_id: int) -> None:
        """SIGKILL node `node_id` (1-based), as a crash would."""
        self.nodes[node_id - 1].kill()

    def start_node(self, node_id: int) -> None:
        """Start node `node_id` (1-based) again and wait until it serves and is registered."""
        self.nodes[node_id - 1].start()
        self._wait_registered(len(self.nodes))

    def leader_of(self, topic: str, partition: int = 0) -> int:
        """Return the node id leading `topic`'s `partition` now."""
        return int(self._described(topic, partition)["leader_id"])

    def in_sync(self, topic: str, partition: int = 0) -> list[int]:
        """Return the node ids of `topic`'s `partition` in-sync replicas, sorted."""
        return sorted(int(node) for node in self._described(topic, partition)["isr_nodes"])

    def _described(self, topic: str, partition: int) -> dict[str, Any]:
        admin = KafkaAdminClient(
            bootstrap_servers=self.bootstrap_servers,
            client_id="txcoord-cluster",
            request_timeout_ms=10_000,
        )
        try:
            described: list[dict[str, Any]] = admin.describe_topics([topic])
        finally:
            admin.close()
        return partition_of(described[0], partition)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
