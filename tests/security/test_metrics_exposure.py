"""Issue 61, finding 9: `/metrics` may need a token, and its series are bounded.

Before, `/metrics` needed no token and named every consumer group and topic, with lag series
keyed by whatever the consumer offsets topic holds: any principal that may write that topic
chose label values (a newline, a name of kilobytes, a path) and how many series every
scraper keeps. Now, with `rest.metrics_token_required`, only a token with `metrics = true`
(a scraper's right) or an admin's reads it; and only well-formed group and topic names become
labels, at most `rest.metrics_max_series` series per family, the rest summed under `(other)`.
Against Kafka (the offsets topic) and the app on a real port.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import httpx
import pytest
from kafka.errors import KafkaError

from coordinator.admin.consumer_groups import live_members
from coordinator.core.config import Config
from coordinator.rest.app import create_app
from coordinator.sdk.consumer.offset_store import OffsetStore
from tests.conftest import ConfigFactory
from tests.coordinator.sdk.http_server import serving
from tests.harness import consumer_topics_of
from tests.security.conftest import deliver

pytestmark = pytest.mark.kafka

TOPIC = "OrderPaid"
TOKENS = {
    "orders": "orders-producer-token-of-this-test",
    "prometheus": "prometheus-scraper-token-of-this-test",
    "admin": "admin-token-of-this-test",
}
LAG = "rocketmq_consumer_lag_messages"


def auth_file(path: Path) -> Path:
    """A producer token, a scraper's token (metrics only) and an admin, owner-only."""

    def digest(name: str) -> str:
        return hashlib.sha256(TOKENS[name].encode()).hexdigest()

    path.touch(mode=0o600)
    path.write_text(
        f'[[token]]\ngroup = "orders"\nsha256 = "{digest("orders")}"\n\n'
        f'[[token]]\nname = "prometheus"\nmetrics = true\nsha256 = "{digest("prometheus")}"\n\n'
        f'[[token]]\nadmin = true\nsha256 = "{digest("admin")}"\n'
    )
    return path


def commit_offsets(config: Config, pairs: list[tuple[str, str]]) -> None:
    """Store an offset of queue 0 for each (consumer group, topic), as any principal that
    may write the offsets topic can; return once Kafka describes those groups (the lag's
    first read then sees them, not a group coordinator still being chosen)."""
    store = OffsetStore(config.kafka.bootstrap_servers, config.kafka.consumer_offsets_topic)
    try:
        for group, topic in pairs:
            store.commit(group, "member-1", {(topic, 0): 0})
    finally:
        store.close()
    deadline = time.monotonic() + 60
    while True:
        try:
            live_members(config, sorted({group for group, _ in pairs}))
            return
        except KafkaError:
            assert time.monotonic() < deadline, "Kafka describes no group"
            time.sleep(0.2)


def lag_series(http: httpx.Client, headers: dict[str, str], wanted: int) -> list[str]:
    """Scrape until the group lag family has `wanted` series at least (it is read in the
    background from the first scrape on); return its sample lines."""
    deadline = time.monotonic() + 60
    while True:
        answer = http.get("/metrics", headers=headers)
        assert answer.status_code == 200, answer.text
        lines = [line for line in answer.text.splitlines() if line.startswith(LAG + "{")]
        if len(lines) >= wanted:
            return lines
        assert time.monotonic() < deadline, f"{len(lines)} of {wanted} lag series came"
        time.sleep(0.2)


def test_metrics_need_a_token_with_the_metrics_right(
    make_config: ConfigFactory, tmp_path: Path
) -> None:
    tokens = auth_file(tmp_path / "tokens.toml")
    config = make_config(**{"rest.auth_file": str(tokens), "rest.metrics_token_required": "true"})
    with serving(create_app(config)) as url, httpx.Client(base_url=url, timeout=30) as http:
        anonymous = http.get("/metrics")
        assert anonymous.status_code == 401, f"{anonymous.status_code}: {anonymous.text[:300]}"
        producer = http.get("/metrics", headers={"Authorization": f"Bearer {TOKENS['orders']}"})
        assert producer.status_code == 403, producer.text[:300]
        assert "metrics = true" in producer.json()["message"]
        for name in ("prometheus", "admin"):
            scraped = http.get("/metrics", headers={"Authorization": f"Bearer {TOKENS[name]}"})
            assert scraped.status_code == 200, (name, scraped.text[:300])
            assert "txcoord_rest_requests_total" in scraped.text
        assert http.get("/healthz").status_code == 200  # still open: it names nothing


def test_only_well_formed_names_become_labels(make_config: ConfigFactory) -> None:
    long_name = "g" * 300  # a producer or consumer group has at most 255 characters
    with consumer_topics_of(make_config()) as config:
        deliver(config, TOPIC, [b"one", b"two", b"three"])
        commit_offsets(
            config,
            [("ledger", TOPIC), ("evil\ngroup", TOPIC), (long_name, TOPIC),
             ("audit", "../../etc/passwd")],
        )  # fmt: skip
        with serving(create_app(config)) as url, httpx.Client(base_url=url, timeout=30) as http:
            lines = lag_series(http, {}, wanted=2)
    text = "\n".join(lines)
    # Before: every one of them a label of its own, as the offsets topic held it.
    for malformed in ("evil\\ngroup", long_name, "../../etc/passwd"):
        assert malformed not in text, f"a malformed name became a label: {lines}"
    assert f'{LAG}{{consumer_group="ledger",topic="{TOPIC}"}} 3.0' in lines, lines
    # The malformed pairs, summed into one series: 3 + 3 messages (no queue of the path).
    assert f'{LAG}{{consumer_group="(other)",topic="(other)"}} 6.0' in lines, lines


def test_a_lag_family_has_at_most_its_series(make_config: ConfigFactory) -> None:
    with consumer_topics_of(make_config(**{"rest.metrics_max_series": "5"})) as config:
        deliver(config, TOPIC, [b"m"] * 4)
        commit_offsets(config, [(f"reader-{n:02d}", TOPIC) for n in range(12)])
        with serving(create_app(config)) as url, httpx.Client(base_url=url, timeout=30) as http:
            lines = lag_series(http, {}, wanted=5)  # one read: all of them, or none yet
    assert len(lines) == 5, lines
    groups = [re.findall(r'consumer_group="([^"]*)"', line) for line in lines]
    assert ["(other)"] in groups, groups
    total = sum(float(line.rsplit(" ", 1)[1]) for line in lines)
    assert total == 12 * 4, f"the lag of the groups left out is not summed: {lines}"
