"""Schemathesis over the OpenAPI document: no request, valid or not, gets a 5xx.

Runs in-process against the ASGI app with the real broker behind it (valid sends really go
to Kafka). Both schema-conforming (positive) and schema-violating (negative) requests are
generated for every operation; the app is in open mode so valid requests reach the writer
(and valid receives join real consumer groups, on consumer topics of the run's own),
addressed to a loopback name (LOCAL) as the open mode requires: every run asserts that no
answer was the open mode's 421, so a run that reached nothing cannot pass. The reads run in
the per-group topic layout too, where a producer group also names Kafka topics (its sends
are covered by tests/coordinator/rest/test_topics_per_group.py: generated groups would each
create topics).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from schemathesis.generation import GenerationMode

from coordinator.core.config import Config
from coordinator.kafka_clients.admin import delete_topic
from coordinator.rest.app import create_app
from streams.kafka_io.delivery_notices import ensure_consumer_topics
from tests.coordinator.rest.conftest import LOCAL, drop_topics, make_rest_config

pytestmark = [pytest.mark.kafka, pytest.mark.long]

EXAMPLES_PER_OPERATION = 60


#: The topic layouts of the runs: the shared topics, and one topic set per group.
LAYOUTS = {"shared": "false", "per-group": "true"}


@pytest.fixture(scope="module")
def config(
    bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Config]:
    # A short long-poll ceiling keeps the generated waits short: a receive or a check poll
    # that finds nothing waits it out (60 examples each), and what is checked is the answer,
    # not the wait; a wait past it is still generated and must be refused with a 4xx. 200 ms
    # made those operations a third of the module's time.
    suffix = uuid.uuid4().hex[:8]
    config = make_rest_config(
        bootstrap_servers,
        tmp_path_factory.mktemp("schemathesis"),
        max_message_size="64KiB",
        **{
            "rest.max_request_size": "512KiB",
            "rest.check_poll_max_wait": "50ms",
            "kafka.topics_per_group": LAYOUTS[request.param],
            "kafka.deliveries_topic": f"deliveries-{suffix}",
            "kafka.consumer_offsets_topic": f"consumer-offsets-{suffix}",
        },
    )
    ensure_consumer_topics(config)  # the engine's, made at its start
    try:
        yield config
    finally:
        drop_topics(config)
        for topic in (config.kafka.deliveries_topic, config.kafka.consumer_offsets_topic):
            delete_topic(config.kafka.bootstrap_servers, topic)


@pytest.fixture(scope="module")
def app(config: Config) -> Iterator[FastAPI]:
    application = create_app(config)
    try:
        yield application
    finally:
        services = application.state.services
        services.consumers.close()
        services.poller.close()
        services.writer.close()


def runs() -> list[tuple[str, str, GenerationMode]]:
    """Return (layout, "METHOD /path", mode) for every operation (per-group: the reads);
    negative ones need some input."""
    document = create_app(Config(warehouse=str(Path("unused")))).openapi()
    found = []
    for layout in LAYOUTS:
        for path, operations in document["paths"].items():
            for method, operation in operations.items():
                if layout == "per-group" and method != "get":
                    continue
                label = f"{method.upper()} {path}"
                found.append((layout, label, GenerationMode.POSITIVE))
                if operation.get("parameters") or operation.get("requestBody"):
                    found.append((layout, label, GenerationMode.NEGATIVE))
    return found


@pytest.mark.parametrize(("config", "label", "mode"), runs(), indirect=["config"])
def test_no_request_is_answered_with_a_5xx(
    app: FastAPI, config: Config, label: str, mode: GenerationMode
) -> None:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers={"Host": "127.0.0.1"})
    operation = schema.find_operation_by_label(label)
    assert operation is not None, label
    answers: dict[int, int] = {}

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        response = case.call(base_url=LOCAL)
        answers[response.status_code] = answers.get(response.status_code, 0) + 1
        assert response.status_code < 500, (case.as_curl_command(), response.text)
        if response.status_code >= 400:
            body = response.json()
            assert set(body) == {"error", "message"}, body

    check()
    assert answers, "no request was generated"
    assert 421 not in answers, f"requests did not reach the app: {answers}"
