"""Issue 61, finding 8: a token holds one share of the long polls and of the REST members.

Before, the shares were per group: a token held 8 check polls of its producer group plus 8
receives of each consumer group it was granted (twice the documented "8 per group", or
more), and 16 REST consumer members per group, so 4 groups, or one token granted 4 groups,
held all 64 members of an ingress. Now a token's check polls and receives together hold at
most one share (8 of 64), its members of every group together at most one share, and a
group's members at most 8 of 64: at least 8 tokens or groups are needed to hold them all;
past a share the answer is 429 at once. Against Kafka and the app on a real port.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from coordinator.core.config import Config
from coordinator.rest.app import create_app
from coordinator.rest.auth import sha256_hex
from coordinator.rest.consumers import ConsumerMembers
from coordinator.rest.poll_slots import PollSlots
from streams.kafka_io.ingress_topics import ensure_ingress_topics
from tests.conftest import ConfigFactory
from tests.coordinator.rest.conftest import drop_topics
from tests.coordinator.rest.test_check_poll import check_row, publish
from tests.coordinator.sdk.helpers import wait_until
from tests.coordinator.sdk.http_server import serving
from tests.harness import consumer_topics_of
from tests.security.conftest import deliver

pytestmark = pytest.mark.kafka

TOPIC = "Ledger"
#: The documented share: of 64 long polls, and of 64 members.
SHARE = 8
TOKENS = {name: f"{name}-token-of-the-share-test" for name in ("orders", "billing", "wide")}
#: The consumer groups `wide` may consume as: one more than a share of members.
WIDE_GROUPS = [f"wide-{n}" for n in range(SHARE + 1)]


def bearer(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[name]}"}


def auth_file(path: Path) -> Path:
    """Write the tokens: orders produces and consumes as orders-readers; billing produces;
    wide consumes as each of WIDE_GROUPS."""
    wide = "".join(
        f'[[token.consume]]\ngroup = "{group}"\ntopics = ["{TOPIC}"]\n' for group in WIDE_GROUPS
    )
    path.write_text(
        f'[[token]]\ngroup = "orders"\nsha256 = "{sha256_hex(TOKENS["orders"])}"\n'
        f'[[token.consume]]\ngroup = "orders-readers"\ntopics = ["{TOPIC}"]\n\n'
        f'[[token]]\ngroup = "billing"\nsha256 = "{sha256_hex(TOKENS["billing"])}"\n\n'
        f'[[token]]\nname = "wide"\nsha256 = "{sha256_hex(TOKENS["wide"])}"\n{wide}'
    )
    path.chmod(0o600)
    return path


@pytest.fixture
def config(make_config: ConfigFactory, tmp_path: Path) -> Iterator[Config]:
    """Return a configuration with the tokens above, its ingress and consumer topics, and a
    few messages on TOPIC."""
    config = make_config(**{"rest.auth_file": str(auth_file(tmp_path / "tokens.toml"))})
    ensure_ingress_topics(config)
    deliver(config, TOPIC, [b"entry"] * 4)
    try:
        with consumer_topics_of(config):
            yield config
    finally:
        drop_topics(config)


def receive(http: httpx.Client, token: str, group: str, **body: Any) -> httpx.Response:
    return http.post(
        f"/v1/consumer-groups/{group}/receive",
        json={"topic": TOPIC, "wait_seconds": 0, **body},
        headers=bearer(token),
    )


def check_poll(http: httpx.Client, token: str, group: str, wait: float) -> httpx.Response:
    return http.get(
        "/v1/check-requests",
        params={"producer_group": group, "wait_seconds": wait, "max": 1},
        headers=bearer(token),
    )


def test_a_tokens_check_polls_and_receives_hold_one_share_together(config: Config) -> None:
    app = create_app(config)
    slots: PollSlots = app.state.services.poll_slots
    wait = config.rest.check_poll_max_wait.total_seconds()
    with (
        serving(app) as url,
        httpx.Client(base_url=url, timeout=60) as http,
        ThreadPoolExecutor(SHARE) as pool,
    ):
        # The token's whole share waits for checks: as long as a poll may, ended below by
        # one check each.
        waiting = [pool.submit(check_poll, http, "orders", "orders", wait) for _ in range(SHARE)]
        wait_until(lambda: slots.total_held() == SHARE, what="the token's polls to wait")
        as_consumer = receive(http, "orders", "orders-readers")
        another_poll = check_poll(http, "orders", "orders", 0)
        other_token = check_poll(http, "billing", "billing", 0)
        still_waiting = slots.total_held() == SHARE
        publish(config, [check_row(f"orders-{n}", "orders") for n in range(SHARE)])
        answers = [future.result() for future in waiting]

    assert still_waiting, f"a poll ended within its {wait:.0f} s wait before the checks"
    # Before: 200, the receive's own share of 8 beside the check polls' 8.
    assert as_consumer.status_code == 429, (
        f"a receive beside the token's {SHARE} check polls: {as_consumer.text}"
    )
    error = as_consumer.json()
    assert error["error"] == "too_many_polls", error
    assert "token 'group orders'" in error["message"], error
    assert as_consumer.headers["retry-after"]
    assert another_poll.status_code == 429, another_poll.text
    assert other_token.status_code == 200, other_token.text  # another token's share
    assert [a.status_code for a in answers] == [200] * SHARE, [a.text for a in answers]
    assert slots.total_held() == 0


def test_a_token_granted_many_groups_holds_one_share_of_the_members(config: Config) -> None:
    app = create_app(config)
    members: ConsumerMembers = app.state.services.consumers
    with serving(app) as url, httpx.Client(base_url=url, timeout=90) as http:
        with ThreadPoolExecutor(SHARE) as pool:
            joined = list(pool.map(lambda group: receive(http, "wide", group), WIDE_GROUPS[:SHARE]))
        assert [a.status_code for a in joined] == [200] * SHARE, [a.text for a in joined]
        # Before: one more member, and on (16 per group, 64 in all: every member of the
        # ingress for a token granted 4 groups).
        over = receive(http, "wide", WIDE_GROUPS[SHARE])
        other = receive(http, "orders", "orders-readers")
        held = len(members.members())

    assert over.status_code == 429, f"the token's member {SHARE + 1}: {over.text}"
    error = over.json()
    assert error["error"] == "too_many_consumers", error
    assert "token 'wide'" in error["message"] and over.headers["retry-after"], error
    assert other.status_code == 200, other.text  # another token's member still joins
    assert held == SHARE + 1


def test_every_member_of_an_ingress_takes_at_least_eight_groups(config: Config) -> None:
    members = ConsumerMembers(config)
    # Before: 16 of 64, so 4 groups held them all.
    assert members.max_members // members.per_group >= SHARE, (
        f"{members.per_group} members per group of {members.max_members}"
    )
    assert PollSlots().total // PollSlots().per_group >= SHARE
