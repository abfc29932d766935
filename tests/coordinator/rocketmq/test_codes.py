"""The REST service layer's refusals as RocketMQ Codes (coordinator/rocketmq/codes.py)."""

from __future__ import annotations

import pytest
from rocketmq.grpc_protocol import Code

from coordinator.core.errors import KafkaUnavailableError, RecordTooLargeError
from coordinator.rest.errors import ApiError
from coordinator.rocketmq.codes import MAX_MESSAGE_CHARACTERS, code_of, refused_status, status


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (ApiError(401, "unauthorized", "no"), Code.UNAUTHORIZED),
        (ApiError(403, "forbidden", "producer_group: no"), Code.FORBIDDEN),
        (ApiError(403, "topic_limit", "topic: full"), Code.FORBIDDEN),
        (ApiError(400, "topic_not_allowed", "topic: 'X' is not"), Code.TOPIC_NOT_FOUND),
        (
            ApiError(413, "too_large", "body_base64: the body is 5 bytes"),
            Code.MESSAGE_BODY_TOO_LARGE,
        ),
        (
            ApiError(413, "too_large", "keys, tags and properties take"),
            Code.MESSAGE_PROPERTIES_TOO_LARGE,
        ),
        (ApiError(429, "too_many_requests", "later"), Code.TOO_MANY_REQUESTS),
        (ApiError(400, "invalid_request", "check_immunity_seconds: 9"), Code.BAD_REQUEST),
        (ApiError(422, "invalid_request", "producer_group: x"), Code.BAD_REQUEST),
    ],
)
def test_each_rest_refusal_has_its_code(error: ApiError, code: int) -> None:
    assert code_of(error) == code
    assert refused_status(error).code == code


def test_a_write_failure_says_not_stored_without_the_broker_s_address() -> None:
    answer = refused_status(KafkaUnavailableError("broker 10.1.2.3:9092 is down"))
    assert answer.code == Code.MASTER_PERSISTENCE_TIMEOUT
    assert "10.1.2.3" not in answer.message
    assert refused_status(RecordTooLargeError("too big")).code == Code.MESSAGE_BODY_TOO_LARGE


def test_a_status_message_is_bounded_and_printable() -> None:
    answer = status(Code.BAD_REQUEST, "\udcff" + "x" * 5000)
    assert len(answer.message) == MAX_MESSAGE_CHARACTERS
    answer.message.encode("utf-8")  # no lone surrogate left
