"""Issue 61, finding 1: consumer rights apart from producer rights (contract 5.1).

Before, a producer group's token was also the consumer group of the same name, on every
topic: the `orders` token could receive every committed message of a topic only `payments`
produces, from the first offset, and a producer token named like a real consumer group
joined it (a share of its queues, its acks). Now a token consumes only as the consumer groups
its `[[token.consume]]` grants name, on their topics (RocketMQ grants Sub per topic and group,
apart from Pub). Against the real engine, Kafka, and the app on a real port.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.core.config import Config
from coordinator.rest.app import create_app
from coordinator.rest.auth import Authenticator, load_token_file, sha256_hex
from tests.coordinator.sdk.http_server import serving
from tests.harness import Engine, Producer
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

PAYMENTS = "Payments"  # only producer group `payments` sends to it
COUNT = 6
TOKENS = {name: f"{name}-token-of-this-test" for name in ("orders", "payments", "ledger", "admin")}
READER = "ledger-reader-token-of-this-test"


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    return make_config()


def auth_file(path: Path, text: str) -> Authenticator:
    """Return the authenticator of the auth file `text` (written owner-only, as required)."""
    path.write_text(text)
    path.chmod(0o600)
    return Authenticator(load_token_file(path))


def producer_tokens(path: Path) -> Authenticator:
    """An auth file as written before consume grants: three producer tokens and an admin."""
    return auth_file(
        path,
        "".join(
            f'[[token]]\ngroup = "{name}"\nsha256 = "{sha256_hex(TOKENS[name])}"\n\n'
            for name in ("orders", "payments", "ledger")
        )
        + f'[[token]]\nadmin = true\nsha256 = "{sha256_hex(TOKENS["admin"])}"\n',
    )


def receive(http: httpx.Client, token: str, group: str, **body: Any) -> httpx.Response:
    return http.post(
        f"/v1/consumer-groups/{group}/receive",
        json={"topic": PAYMENTS, "start_from": "first", "max_messages": 32, **body},
        headers={"Authorization": f"Bearer {token}"},
    )


def receive_all(http: httpx.Client, token: str, group: str) -> list[dict[str, Any]]:
    """Receive and ack as one member of `group` until COUNT messages came (180 s at most:
    the engine's first batches on a loaded 2-core machine)."""
    got: list[dict[str, Any]] = []
    member = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        answer = receive(
            http, token, group, wait_seconds=3, **({"member": member} if member else {})
        )
        assert answer.status_code == 200, answer.text
        member, messages = answer.json()["member"], answer.json()["messages"]
        if messages:
            acked = http.post(
                f"/v1/consumer-groups/{group}/ack",
                json={"member": member, "receipts": [m["receipt"] for m in messages]},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert acked.status_code == 200 and all(r["acked"] for r in acked.json()["results"])
            got += messages
        if len(got) >= COUNT:
            return got
    raise AssertionError(f"{len(got)} of {COUNT} messages came")


def test_a_producer_token_is_no_consumer_group_and_reads_no_other_groups_topic(
    config: Config, engine: Engine, tmp_path: Path
) -> None:
    producer = Producer(config)
    try:
        txs = [f"pay-{i}" for i in range(COUNT)]
        for i, tx in enumerate(txs):
            producer.half(tx, group="payments", topic=PAYMENTS, queue_id=i % 2)
        producer.flush()
        for tx in txs:
            producer.op(tx, "COMMIT", group="payments")
        producer.flush()
    finally:
        producer.close()

    auth = producer_tokens(tmp_path / "before.toml")  # a file of yesterday still loads
    with (
        serving(create_app(config, auth=auth)) as url,
        httpx.Client(base_url=url, timeout=60) as http,
    ):
        # What there is to read: the admin (every group) gets every committed message.
        seen = receive_all(http, TOKENS["admin"], "audit")
        assert sorted(m["transaction_id"] for m in seen) == sorted(txs)
        assert {m["producer_group"] for m in seen} == {"payments"}

        # The orders producer token, as consumer group "orders", on payments' topic: before,
        # 200 and every message (bodies, keys, transaction ids) from the first offset.
        answer = receive(http, TOKENS["orders"], "orders", wait_seconds=5)
        assert answer.status_code == 403, answer.text
        message = answer.json()["message"]
        assert "token 'group orders' may not consume as consumer group 'orders'" in message
        assert '[[token.consume]] group = "orders" topics = ["Payments"]' in message
        assert "not the consumer group of the same name" in message

        # A producer token named like a real consumer group ("ledger") does not join it.
        answer = receive(http, TOKENS["ledger"], "ledger", wait_seconds=0, member="intruder")
        assert answer.status_code == 403, answer.text

    # The right granted on its own: a consumer token of group "ledger" on Payments only.
    auth = auth_file(
        tmp_path / "after.toml",
        f'[[token]]\nname = "ledger-reader"\nsha256 = "{sha256_hex(READER)}"\n'
        '[[token.consume]]\ngroup = "ledger"\ntopics = ["Payments"]\n',
    )
    with (
        serving(create_app(config, auth=auth)) as url,
        httpx.Client(base_url=url, timeout=60) as http,
    ):
        got = receive_all(http, READER, "ledger")
        assert sorted(m["transaction_id"] for m in got) == sorted(txs)
        answer = receive(http, READER, "ledger", topic="OrderPaid", wait_seconds=0)
        assert answer.status_code == 403, answer.text
        assert "not 'OrderPaid'" in answer.json()["message"]
