"""The REST path: halves and ops through the ingress's batch endpoints (SPEC 5.1).

Per batch: POST /v1/transactions/batch (answered 201 once every half is durable in Kafka),
then POST /v1/ops/batch (202 once every op is). An op's acknowledgement time is when the
202 arrived: the moment the producer knows its decision is durable. Several sender threads
may share one driver; each uses its own HTTP connection.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import httpx

from coordinator.bench.kafka_driver import now_ms
from coordinator.bench.workload import Kind


class RestDriver:
    """Send transactions of one producer group through the REST ingress."""

    def __init__(
        self,
        endpoint: str,
        group: str,
        topic: str,
        *,
        body_size: int = 100,
        token: str | None = None,
    ) -> None:
        self.endpoint, self.group, self.topic = endpoint.rstrip("/"), group, topic
        self.body = "x" * body_size
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.half_acks: dict[str, int] = {}
        self.op_acks: dict[str, int] = {}
        self.errors: list[str] = []
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._lock = threading.Lock()

    def _client(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            client = httpx.Client(base_url=self.endpoint, headers=self.headers, timeout=120)
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def _post(self, path: str, payload: dict[str, Any], status: int) -> None:
        response = self._client().post(path, json=payload)
        if response.status_code != status:
            raise RuntimeError(
                f"POST {path} answered {response.status_code}: {response.text[:300]}"
            )

    def send(self, batch: Sequence[tuple[str, Kind]], *, ops: bool = True) -> None:
        """Store the batch's halves, then its ops; both acknowledged on return."""
        messages = [
            {
                "producer_group": self.group,
                "topic": self.topic,
                "body": self.body,
                "transaction_id": transaction_id,
                "keys": [transaction_id],
                "properties": {"bench.kind": kind.name},
            }
            for transaction_id, kind in batch
        ]
        self._post("/v1/transactions/batch", {"messages": messages}, 201)
        acked = now_ms()
        for transaction_id, _ in batch:
            self.half_acks[transaction_id] = acked
        if not ops:
            return
        items = [
            {"transaction_id": transaction_id, "op": kind.first_op, "producer_group": self.group}
            for transaction_id, kind in batch
        ]
        self._post("/v1/ops/batch", {"ops": items}, 202)
        acked = now_ms()
        for transaction_id, _ in batch:
            self.op_acks[transaction_id] = acked

    def finish(self) -> None:
        """Nothing is left in flight: every call waited for its answer."""

    def close(self) -> None:
        """Close every thread's HTTP client."""
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()
