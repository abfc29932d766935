"""Fixtures of the security reproductions that need no engine: a configuration whose consumer
topics exist, committed messages written straight into the warehouse's tables (as the
engine's delivery writes them), and a REST consumer that keeps its member id."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from coordinator.core.config import Config
from delta_tables import queue_offsets, topics
from tests.conftest import ConfigFactory
from tests.coordinator.rest.delta_io import append
from tests.harness import consumer_topics_of

MIB = 1024 * 1024


@pytest.fixture
def consumer_config(make_config: ConfigFactory) -> Iterator[Config]:
    """Return a configuration of this test's own whose consumer topics exist."""
    with consumer_topics_of(make_config()) as config:
        yield config


def deliver(config: Config, topic: str, bodies: list[bytes]) -> None:
    """Write `bodies` as the committed messages of `topic`'s queue 0, offsets 0, 1, 2...:
    the topic table first, then `system/queue_offsets` (the engine's order)."""
    now = datetime.now(UTC)
    rows = [
        {
            "transaction_id": f"tx-{offset}", "msg_id": f"msg-{offset}",
            "producer_group": "orders", "topic": topic, "queue_id": 0,
            "queue_offset": offset, "body": body, "keys": [f"tx-{offset}"], "tags": None,
            "properties": {}, "prepared_at": now, "committed_at": now, "delivered_at": now,
            "commit_op_id": f"op-{offset}", "batch_id": 1,
        }
        for offset, body in enumerate(bodies)
    ]  # fmt: skip
    append(config.warehouse, topics.table(topic), rows)
    append(
        config.warehouse,
        queue_offsets.TABLE,
        [{"topic": topic, "queue_id": 0, "next_offset": len(bodies), "batch_id": 1}],
    )


class Member:
    """One REST consumer member of `group` on `topic`, over a real HTTP connection."""

    def __init__(self, http: httpx.Client, group: str, topic: str, **body: Any) -> None:
        self.http = http
        self.group = group
        self.body = {"topic": topic, "start_from": "first", **body}
        self.member: str | None = None

    def receive(self, **extra: Any) -> httpx.Response:
        """POST a receive; remember the member id the first answer makes."""
        body = {**self.body, **extra}
        if self.member is not None:
            body["member"] = self.member
        answer = self.http.post(f"/v1/consumer-groups/{self.group}/receive", json=body)
        if answer.status_code == 200:
            self.member = answer.json()["member"]
        return answer

    def ack(self, receipts: list[str]) -> list[dict[str, Any]]:
        """Ack `receipts`; return each one's outcome."""
        answer = self.http.post(
            f"/v1/consumer-groups/{self.group}/ack",
            json={"member": self.member, "receipts": receipts},
        )
        assert answer.status_code == 200, answer.text
        results: list[dict[str, Any]] = answer.json()["results"]
        return results
