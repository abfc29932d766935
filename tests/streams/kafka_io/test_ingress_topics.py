"""A service's start refuses an ingress-topic failure with one clear line (pure logic: the
Kafka admin call is replaced; the topics' settings against a real broker are covered by
tests/streams/kafka_io/test_check_topic.py and every engine start)."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.core.errors import ConfigurationError, TxcoordError
from streams.kafka_io import ingress_topics
from tests.conftest import config_under


def test_an_unexpected_failure_names_the_brokers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(config: object) -> None:
        raise OSError("connection refused")

    monkeypatch.setattr(ingress_topics, "ensure_ingress_topics", fail)
    config = config_under(tmp_path, "127.0.0.1:9")
    with pytest.raises(TxcoordError, match=r"ingress topics on 127\.0\.0\.1:9: connection refused"):
        ingress_topics.prepare_ingress_topics(config)


def test_a_txcoord_error_passes_through_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refusal = ConfigurationError("topic half-x exists with CreateTime")

    def fail(config: object) -> None:
        raise refusal

    monkeypatch.setattr(ingress_topics, "ensure_ingress_topics", fail)
    with pytest.raises(ConfigurationError) as caught:
        ingress_topics.prepare_ingress_topics(config_under(tmp_path, "127.0.0.1:9"))
    assert caught.value is refusal


class _LateBroker:
    """An admin client whose broker describes a new topic only from its third answer."""

    def __init__(self) -> None:
        self.asked = 0

    def describe_configs(self, resources: object) -> dict[str, object]:
        self.asked += 1
        if self.asked < 3:
            return {"topic": {}}
        return {"topic": {"t": {"message.timestamp.type": {"value": "LogAppendTime"}}}}


def test_a_topic_not_described_yet_is_asked_for_again() -> None:
    admin = _LateBroker()
    found = ingress_topics.described_settings(admin, "t", bound=10)
    assert found["message.timestamp.type"] == "LogAppendTime" and admin.asked == 3


def test_a_topic_never_described_is_judged_as_it_is_after_the_bound() -> None:
    admin = _LateBroker()
    found = ingress_topics.described_settings(admin, "t", bound=0)
    assert found["message.timestamp.type"] is None and admin.asked == 1
