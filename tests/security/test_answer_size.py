"""Issue 61, finding 2: REST answers bounded in bytes, not only in count.

Before, a receive handed out up to 32 messages of up to 4 MiB, each body twice (as text and
as base64), and JSON turns a NUL byte into six (`\\u0000`): 16 messages of 1 MiB of NULs made
one answer of 117 MiB, encoded on the event loop (every other request, `/healthz` too, waited
for it). A check poll answered up to 500 checks with their bodies, and a group's mailbox of
collected checks held up to 1,000 of them whatever their size. Now every answer stays within
`rest.max_answer_size` (8 MiB by default; one message or check alone may pass it, so that
none is stuck), a body comes once, in the encoding the client asks for (`body_encoding`),
and a group's mailbox holds at most `rest.check_mailbox_size` bytes. Against Kafka and the
app on a real port; the sizes are those of the HTTP bodies.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kafka import KafkaProducer

from coordinator.core.config import Config
from coordinator.protocol.check_record import CheckRecord
from coordinator.rest.app import create_app
from tests.coordinator.rest.conftest import drop_topics, make_rest_config
from tests.coordinator.sdk.http_server import serving
from tests.security.conftest import MIB, Member, deliver

pytestmark = pytest.mark.kafka

TOPIC = "Archive"
#: rest.max_answer_size and rest.check_mailbox_size by default.
ANSWER_BUDGET = 8 * MIB
MAILBOX_BUDGET = 8 * MIB


def messages_of(answer: httpx.Response) -> list[dict[str, Any]]:
    assert answer.status_code == 200, answer.text[:500]
    found: list[dict[str, Any]] = answer.json()["messages"]
    return found


def test_a_receive_answer_is_bounded_in_bytes_and_sends_each_body_once(
    consumer_config: Config,
) -> None:
    nuls, big = b"\x00" * MIB, b"\x00" * (2 * MIB)  # 6 and 12 MiB of JSON as text
    deliver(consumer_config, TOPIC, [nuls] * 16 + [big] * 2)
    with (
        serving(create_app(consumer_config)) as url,
        httpx.Client(base_url=url, timeout=120) as http,
    ):
        reader = Member(http, "archive", TOPIC, invisible_seconds=600)
        got: list[dict[str, Any]] = []
        sizes: list[int] = []
        deadline = time.monotonic() + 60
        while len(got) < 16:
            assert time.monotonic() < deadline, f"{len(got)} of 16 messages came"
            answer = reader.receive(wait_seconds=2, max_messages=16 - len(got))
            messages = messages_of(answer)
            if not messages:  # joining the group
                continue
            sizes.append(len(answer.content))
            # Before: 16 messages, 117 MiB of JSON, each body as text and as base64.
            assert len(answer.content) <= ANSWER_BUDGET, (
                f"an answer of {len(answer.content)} bytes for {len(messages)} messages of "
                f"1 MiB: more than rest.max_answer_size ({ANSWER_BUDGET})"
            )
            for message in messages:
                sent = [name for name in ("body", "body_base64") if message[name] is not None]
                assert sent == ["body_base64"], f"the body came as {sent}, not once as base64"
                assert base64.b64decode(message["body_base64"]) == nuls
            got += messages
            assert all(r["acked"] for r in reader.ack([m["receipt"] for m in messages]))
        assert [m["queue_offset"] for m in got] == list(range(16))
        assert len(sizes) > 1  # the budget split them

        # As text, asked for: a body of 2 MiB of NULs is 12 MiB of JSON, over the budget
        # alone: it still comes (on its own), else it would be stuck for ever.
        for offset in (16, 17):
            messages = messages_of(
                reader.receive(wait_seconds=2, max_messages=32, body_encoding="text")
            )
            assert [m["queue_offset"] for m in messages] == [offset]
            assert messages[0]["body"] == big.decode()
            assert messages[0]["body_base64"] is None
            assert reader.ack([messages[0]["receipt"]])[0]["acked"]


@pytest.fixture
def check_config(bootstrap_servers: str, tmp_path: Path) -> Iterator[Config]:
    """A configuration whose ingress topics (the check topic among them) exist; a check
    waits a minute for a poll of the instance that sent its half."""
    config = make_rest_config(bootstrap_servers, tmp_path, **{"rest.check_sender_first": "1m"})
    try:
        yield config
    finally:
        drop_topics(config)


def publish_checks(config: Config, group: str, instance: str, count: int, size: int) -> None:
    """Publish `count` checks of `group` whose halves `instance` sent, bodies of `size` bytes."""
    producer = KafkaProducer(
        bootstrap_servers=config.kafka.bootstrap_servers, acks="all", max_request_size=8 * MIB
    )
    try:
        for number in range(count):
            check = CheckRecord(
                transaction_id=f"tx-{number}", msg_id=f"msg-{number}", producer_group=group,
                topic="OrderPaid", queue_id=0, body=bytes([number]) * size, keys=(), tags=None,
                properties={}, check_number=1, producer_instance=instance,
            )  # fmt: skip
            key, value, headers = check.encode()
            producer.send(config.kafka.check_topic, key=key, value=value, headers=headers)
        producer.flush(60)
    finally:
        producer.close()


def test_check_polls_and_the_mailbox_are_bounded_in_bytes(check_config: Config) -> None:
    group = f"orders-{uuid.uuid4().hex[:6]}"
    count, size = 24, 512 * 1024  # 16 MiB of JSON in all
    publish_checks(check_config, group, "sender", count, size)
    app = create_app(check_config)
    poller = app.state.services.poller
    with serving(app) as url, httpx.Client(base_url=url, timeout=120) as http:

        def poll(instance: str, wait: float) -> httpx.Response:
            params = {"producer_group": group, "max": 500, "wait_seconds": wait}
            return http.get("/v1/check-requests", params={**params, "producer_instance": instance})

        # Another instance polls: the checks wait for their sender, collected meanwhile,
        # until the mailbox holds them all, or holds what fits and stopped growing.
        one = 4 * -(-size // 3)  # a body in base64
        held, counts = 0, [0]
        deadline = time.monotonic() + 60
        while counts[-1] < count and not (
            held + one > MAILBOX_BUDGET - 64 * 1024 and counts[-3:] == [counts[-1]] * 3
        ):
            assert time.monotonic() < deadline, f"{held} bytes of checks collected"
            answer = poll("someone-else", 1)
            assert answer.status_code == 200 and answer.json()["check_requests"] == []
            mailbox = poller._slots[group].waiting
            held = sum(len(w.request.body_base64) for w in mailbox)
            counts.append(len(mailbox))
        # Before: all 24 collected (16 MiB) however large, up to 1,000 checks.
        assert held <= MAILBOX_BUDGET, (
            f"the group's mailbox holds {counts[-1]} checks, {held} bytes of bodies: more "
            f"than rest.check_mailbox_size ({MAILBOX_BUDGET})"
        )

        got: list[dict[str, Any]] = []
        deadline = time.monotonic() + 60
        while len(got) < count:
            assert time.monotonic() < deadline, f"{len(got)} of {count} checks came"
            answer = poll("sender", 2)
            assert answer.status_code == 200, answer.text[:500]
            # Before: every check collected, in one answer of 16 MiB.
            assert len(answer.content) <= ANSWER_BUDGET, (
                f"a check poll answered {len(answer.content)} bytes: more than "
                f"rest.max_answer_size ({ANSWER_BUDGET})"
            )
            got += answer.json()["check_requests"]
        assert sorted(c["transaction_id"] for c in got) == sorted(f"tx-{n}" for n in range(count))
