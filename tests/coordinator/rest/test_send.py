"""Halves and ops through the REST land in Kafka exactly as coordinator/protocol/ingress.py says."""

from __future__ import annotations

import base64
import json
import re
from datetime import datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from coordinator.core.config import Config
from coordinator.protocol import ingress as fmt
from tests.coordinator.rest.conftest import LOCAL
from tests.coordinator.rest.kafka_io import read_all

pytestmark = pytest.mark.kafka

RFC3339_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def by_position(config: Config, topic: str) -> dict[tuple[int, int], Any]:
    """Return every record of `topic`, keyed by (partition, offset)."""
    return {(r.partition, r.offset): r for r in read_all(config.kafka.bootstrap_servers, topic)}


def stored_ms(answer: dict[str, Any]) -> int:
    moment = datetime.fromisoformat(answer["stored_at"].replace("Z", "+00:00"))
    return round(moment.timestamp() * 1000)


def test_a_half_with_every_field_is_one_record_in_the_half_topic(
    client: TestClient, rest_config: Config
) -> None:
    answer = client.post(
        "/v1/transactions",
        json={
            "producer_group": "orders",
            "topic": "OrderPaid",
            "queue_id": 3,
            "body": "payé €5",
            "keys": ["o-1", "client-ü"],
            "tags": "TagA",
            "properties": {"trace": "t-1", "région": "eu"},
            "transaction_id": "tx 1/a",
            "check_immunity_seconds": 60,
        },
    )
    assert answer.status_code == 201, answer.text
    sent = answer.json()
    assert sent["transaction_id"] == "tx 1/a"
    assert sent["status"] == "PREPARED"
    assert sent["msg_id"] == fmt.msg_id_of(sent["partition"], sent["offset"])
    assert RFC3339_MS.fullmatch(sent["stored_at"])

    records = by_position(rest_config, rest_config.kafka.half_topic)
    assert len(records) == 1
    record = records[(sent["partition"], sent["offset"])]
    assert record.key == b"tx 1/a"
    assert record.value == "payé €5".encode()
    assert record.timestamp_type == 1  # LogAppendTime: the broker's clock
    assert record.timestamp == stored_ms(sent)
    headers = dict(record.headers)
    assert len(headers) == len(record.headers)  # no header twice
    born_at = int(headers.pop(fmt.BORN_AT))
    assert abs(born_at - record.timestamp) < 60_000
    assert headers == {
        fmt.PRODUCER_GROUP: b"orders",
        fmt.TOPIC: b"OrderPaid",
        fmt.QUEUE_ID: b"3",
        fmt.KEYS: json.dumps(["o-1", "client-ü"]).encode(),
        fmt.TAGS: b"TagA",
        "prop.trace": b"t-1",
        "prop.région": b"eu",
        fmt.CHECK_IMMUNITY_SECONDS: b"60",
    }
    assert json.loads(headers[fmt.KEYS]) == ["o-1", "client-ü"]


def test_a_minimal_half_gets_a_generated_id_and_an_empty_body(
    client: TestClient, rest_config: Config
) -> None:
    answer = client.post("/v1/transactions", json={"producer_group": "g", "topic": "T"})
    assert answer.status_code == 201, answer.text
    sent = answer.json()
    assert re.fullmatch(r"[0-9a-f]{32}", sent["transaction_id"])
    record = by_position(rest_config, rest_config.kafka.half_topic)[
        (sent["partition"], sent["offset"])
    ]
    assert record.key == sent["transaction_id"].encode()
    assert record.value == b""
    # No queue id: the ingest picks crc32(id) % default_queue_count; no optional header.
    assert sorted(k for k, _ in record.headers) == sorted(
        [fmt.PRODUCER_GROUP, fmt.TOPIC, fmt.BORN_AT]
    )


def test_a_binary_body_travels_as_base64(client: TestClient, rest_config: Config) -> None:
    body = bytes(range(256)) * 3
    answer = client.post(
        "/v1/transactions",
        json={"producer_group": "g", "topic": "T", "body_base64": base64.b64encode(body).decode()},
    )
    assert answer.status_code == 201, answer.text
    sent = answer.json()
    record = by_position(rest_config, rest_config.kafka.half_topic)[
        (sent["partition"], sent["offset"])
    ]
    assert record.value == body


def test_a_body_of_exactly_max_message_size_is_accepted(
    client: TestClient, rest_config: Config
) -> None:
    body = b"x" * rest_config.max_message_size
    answer = client.post(
        "/v1/transactions",
        json={"producer_group": "g", "topic": "T", "body_base64": base64.b64encode(body).decode()},
    )
    assert answer.status_code == 201, answer.text
    sent = answer.json()
    record = by_position(rest_config, rest_config.kafka.half_topic)[
        (sent["partition"], sent["offset"])
    ]
    assert record.value == body


@pytest.mark.parametrize(
    ("path", "op"), [("commit", "COMMIT"), ("rollback", "ROLLBACK"), ("unknown", "UNKNOWN")]
)
def test_an_op_is_one_record_in_the_op_topic(
    client: TestClient, rest_config: Config, path: str, op: str
) -> None:
    answer = client.post(
        f"/v1/transactions/tx-9/{path}", json={"producer_group": "orders", "from_check": True}
    )
    assert answer.status_code == 202, answer.text
    done = answer.json()
    (record,) = by_position(rest_config, rest_config.kafka.op_topic).values()
    assert done == {
        "transaction_id": "tx-9", "op": op,
        "op_id": fmt.op_id_of(record.partition, record.offset), "stored_at": done["stored_at"],
    }  # fmt: skip
    assert stored_ms(done) == record.timestamp
    assert record.key == b"tx-9"
    assert record.value == b""
    headers = dict(record.headers)
    headers.pop(fmt.BORN_AT)
    assert headers == {fmt.PRODUCER_GROUP: b"orders", fmt.OP: op.encode(), fmt.FROM_CHECK: b"true"}


def test_a_transaction_id_with_a_slash_can_be_committed(
    client: TestClient, rest_config: Config
) -> None:
    answer = client.post("/v1/transactions/a%2Fb%3Fc/commit", json={"producer_group": "g"})
    assert answer.status_code == 202, answer.text
    assert answer.json()["transaction_id"] == "a/b?c"
    (record,) = by_position(rest_config, rest_config.kafka.op_topic).values()
    assert record.key == b"a/b?c"
    assert dict(record.headers)[fmt.FROM_CHECK] == b"false"


def test_a_batch_of_halves_is_written_in_request_order(
    client: TestClient, rest_config: Config
) -> None:
    messages = [
        {"producer_group": "orders", "topic": f"T{i}", "body": f"b{i}", "transaction_id": f"b-{i}"}
        for i in range(25)
    ]
    answer = client.post("/v1/transactions/batch", json={"messages": messages})
    assert answer.status_code == 201, answer.text
    items = answer.json()["results"]
    assert [item["status"] for item in items] == [201] * 25
    results = [item["result"] for item in items]
    assert [r["transaction_id"] for r in results] == [f"b-{i}" for i in range(25)]
    records = by_position(rest_config, rest_config.kafka.half_topic)
    assert len(records) == 25
    for i, result in enumerate(results):
        record = records[(result["partition"], result["offset"])]
        assert result["msg_id"] == fmt.msg_id_of(record.partition, record.offset)
        assert record.key == f"b-{i}".encode()
        assert record.value == f"b{i}".encode()
        assert dict(record.headers)[fmt.TOPIC] == f"T{i}".encode()


def test_a_batch_of_ops_is_written_in_request_order(
    client: TestClient, rest_config: Config
) -> None:
    ops: list[dict[str, Any]] = [
        {"transaction_id": f"o-{i}", "op": ["COMMIT", "ROLLBACK", "UNKNOWN"][i % 3],
         "producer_group": "orders", "from_check": i % 2 == 0}
        for i in range(12)
    ]  # fmt: skip
    answer = client.post("/v1/ops/batch", json={"ops": ops})
    assert answer.status_code == 202, answer.text
    items = answer.json()["results"]
    assert [item["status"] for item in items] == [202] * 12
    results = [item["result"] for item in items]
    records = {
        r.key.decode(): r
        for r in read_all(rest_config.kafka.bootstrap_servers, rest_config.kafka.op_topic)
    }
    assert len(records) == 12
    for op, result in zip(ops, results, strict=True):
        record = records[op["transaction_id"]]
        assert result["transaction_id"] == op["transaction_id"]
        assert result["op"] == op["op"]
        assert result["op_id"] == fmt.op_id_of(record.partition, record.offset)
        headers = dict(record.headers)
        assert headers[fmt.OP] == op["op"].encode()
        assert headers[fmt.FROM_CHECK] == (b"true" if op["from_check"] else b"false")


def test_health_and_openapi(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    document = client.get("/openapi.json").json()
    assert set(document["paths"]) >= {
        "/v1/transactions", "/v1/transactions/batch", "/v1/transactions/{transaction_id}/commit",
        "/v1/transactions/{transaction_id}/rollback", "/v1/transactions/{transaction_id}/unknown",
        "/v1/ops/batch", "/v1/transactions/{transaction_id}", "/v1/check-requests", "/healthz",
        "/metrics",
    }  # fmt: skip
    send = document["paths"]["/v1/transactions"]["post"]["responses"]
    assert "422" not in send
    assert set(send) == {"201", "400", "401", "403", "413", "415", "503"}


def test_metrics_count_requests_and_records(client: TestClient) -> None:
    client.post("/v1/transactions", json={"producer_group": "g", "topic": "T"})
    client.post("/v1/transactions/x/commit", json={"producer_group": "g"})
    client.post("/v1/transactions", json={"producer_group": "g", "topic": "system"})
    client.get("/no/such/path")
    text = client.get("/metrics").text
    assert 'txcoord_rest_records_written_total{kind="half"} 1.0' in text
    assert 'txcoord_rest_records_written_total{kind="op"} 1.0' in text
    assert (
        'txcoord_rest_requests_total{method="POST",route="/v1/transactions",status="201"} 1.0'
        in text
    )
    assert (
        'txcoord_rest_requests_total{method="POST",route="/v1/transactions",status="400"} 1.0'
        in text
    )
    assert (
        'txcoord_rest_requests_total{method="POST",'
        'route="/v1/transactions/{transaction_id}/commit",status="202"} 1.0' in text
    )
    assert 'txcoord_rest_requests_total{method="GET",route="unmatched",status="404"} 1.0' in text
    assert "txcoord_rest_request_duration_seconds_bucket" in text


def test_each_app_has_its_own_registry(rest_config: Config) -> None:
    from coordinator.rest.app import create_app  # noqa: PLC0415

    with (
        TestClient(create_app(rest_config), base_url=LOCAL) as first,
        TestClient(create_app(rest_config), base_url=LOCAL) as second,
    ):
        first.get("/healthz")
        first.get("/healthz")
        second.get("/healthz")
        assert 'route="/healthz",status="200"} 2.0' in first.get("/metrics").text
        assert 'route="/healthz",status="200"} 1.0' in second.get("/metrics").text


def test_kafka_unreachable_is_a_503(rest_config: Config, free_port: int) -> None:
    from coordinator.core.config import load_config  # noqa: PLC0415
    from coordinator.rest.app import create_app  # noqa: PLC0415

    down = load_config(
        overrides={
            "kafka.bootstrap_servers": f"127.0.0.1:{free_port}",
            "warehouse": rest_config.warehouse,
        }
    )
    app = create_app(down)
    with TestClient(app, base_url=LOCAL, raise_server_exceptions=False) as test_client:
        answer = test_client.post("/v1/transactions", json={"producer_group": "g", "topic": "T"})
        assert answer.status_code == 503
        assert answer.json()["error"] == "kafka_unavailable"
        assert answer.headers["retry-after"] == "1"
        # Nothing of the ingress's insides: not the broker's address, not the client's error.
        assert str(free_port) not in answer.text and "127.0.0.1" not in answer.text
        assert "Error" not in answer.json()["message"]
        answer = test_client.get("/v1/check-requests?producer_group=g&wait_seconds=0")
        assert answer.status_code == 503
        assert answer.json()["error"] == "kafka_unavailable"
