"""The bench's REST driver resends only the items a batch answer says are not durable."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from coordinator.bench.rest_driver import RestDriver
from coordinator.bench.workload import COMMIT


def item(status: int, transaction_id: str) -> dict[str, Any]:
    error = None if status < 300 else {"error": "kafka_unavailable", "message": "m"}
    return {
        "status": status,
        "transaction_id": transaction_id,
        "result": {} if status < 300 else None,
        "error": error,
    }


def test_a_partly_durable_batch_resends_only_the_failed_items() -> None:
    """Answers as the ingress gives them: 207 (b not durable), then 201 for b alone."""
    seen: list[list[str]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        key = "messages" if request.url.path == "/v1/transactions/batch" else "ops"
        ids = [entry["transaction_id"] for entry in json.loads(request.content)[key]]
        seen.append(ids)
        ok = 201 if key == "messages" else 202
        if len(seen) == 1:
            return httpx.Response(
                207, json={"results": [item(ok, "a"), item(503, "b"), item(ok, "c")]}
            )
        if len(seen) == 2:
            return httpx.Response(503, json={"error": "kafka_unavailable", "message": "m"})
        return httpx.Response(ok, json={"results": [item(ok, tx) for tx in ids]})

    driver = RestDriver("http://ingress", "g", "T", transport=httpx.MockTransport(answer))
    driver.retry_pause_seconds = 0
    kind = COMMIT
    driver.send([("a", kind), ("b", kind), ("c", kind)])
    driver.close()
    assert seen == [["a", "b", "c"], ["b"], ["b"], ["a", "b", "c"]]
    assert set(driver.half_acks) == set(driver.op_acks) == {"a", "b", "c"}


def test_an_item_refused_for_good_stops_the_driver() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            207,
            json={
                "results": [
                    item(201, "a"),
                    {**item(413, "b"), "error": {"error": "too_large", "message": "m"}},
                ]
            },
        )

    driver = RestDriver("http://ingress", "g", "T", transport=httpx.MockTransport(answer))
    kind = COMMIT
    with pytest.raises(RuntimeError, match="too_large"):
        driver.send([("a", kind), ("b", kind)])
    driver.close()
