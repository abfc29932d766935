"""The REST path: halves and ops through the ingress's batch endpoints (contract 5.1).

Per batch: POST /v1/transactions/batch (answered 201 once every half is durable in Kafka),
then POST /v1/ops/batch (202 once every op is). A batch is answered item by item: on a 207
(some items durable, some not) or a 503 (none), only the items that are not durable are
sent again, so a retry never duplicates a durable record. An acknowledgement time is when
the answer that made the item durable arrived. Several sender threads may share one
driver; each uses its own HTTP connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx

from coordinator.bench.kafka_driver import now_ms
from coordinator.bench.workload import Kind

#: Rounds of resending the items a batch answer says are not durable (503 per item or all).
ATTEMPTS = 5
RETRY_PAUSE_SECONDS = 0.5


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
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.endpoint, self.group, self.topic = endpoint.rstrip("/"), group, topic
        self.body = "x" * body_size
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._transport = transport  # tests answer with their own
        self.retry_pause_seconds = RETRY_PAUSE_SECONDS
        self.half_acks: dict[str, int] = {}
        self.op_acks: dict[str, int] = {}
        self.errors: list[str] = []
        self._local = threading.local()
        self._clients: list[httpx.Client] = []
        self._lock = threading.Lock()

    def _client(self) -> httpx.Client:
        client: httpx.Client | None = getattr(self._local, "client", None)
        if client is None:
            client = httpx.Client(
                base_url=self.endpoint, headers=self.headers, timeout=120, transport=self._transport
            )
            self._local.client = client
            with self._lock:
                self._clients.append(client)
        return client

    def _post_items(
        self, path: str, key: str, items: list[dict[str, Any]], ok: int
    ) -> dict[str, int]:
        """POST `items` as one batch, resending only those not durable; return {id: ack ms}."""
        acked: dict[str, int] = {}
        pending = items
        for attempt in range(1, ATTEMPTS + 1):
            response = self._client().post(path, json={key: pending})
            now = now_ms()
            if response.status_code == 503:
                retry = pending  # nothing durable
            elif response.status_code in (ok, 207):
                retry = []
                for item, result in zip(pending, response.json()["results"], strict=True):
                    if result["status"] == ok:
                        acked[item["transaction_id"]] = now
                    elif result["status"] == 503:
                        retry.append(item)
                    else:
                        raise RuntimeError(f"POST {path}: item refused: {result}")
            else:
                raise RuntimeError(
                    f"POST {path} answered {response.status_code}: {response.text[:300]}"
                )
            if not retry:
                return acked
            if attempt == ATTEMPTS:
                raise RuntimeError(f"POST {path}: {len(retry)} items not durable after retries")
            pending = retry
            time.sleep(self.retry_pause_seconds)
        return acked

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
        self.half_acks.update(self._post_items("/v1/transactions/batch", "messages", messages, 201))
        if not ops:
            return
        items = [
            {"transaction_id": transaction_id, "op": kind.first_op, "producer_group": self.group}
            for transaction_id, kind in batch
        ]
        self.op_acks.update(self._post_items("/v1/ops/batch", "ops", items, 202))

    def finish(self) -> None:
        """Nothing is left in flight: every call waited for its answer."""

    def close(self) -> None:
        """Close every thread's HTTP client."""
        with self._lock:
            clients, self._clients = self._clients, []
        for client in clients:
            client.close()
