"""Every refusal as a RocketMQ `Code` with a message: the REST service layer's errors mapped.

The endpoint reuses the REST ingress's validation (coordinator/rest), whose refusals are
`ApiError`s with an HTTP status and a stable code; a RocketMQ client reads a `Status` instead
(apache.rocketmq.v2.Code). One table, so the gRPC answer of a refusal is the REST answer's
twin (docs/rocketmq.md lists it):

    REST                          RocketMQ Code
    401 unauthorized              UNAUTHORIZED
    403 forbidden, topic_limit    FORBIDDEN
    400 topic_not_allowed         TOPIC_NOT_FOUND (auto_create_topic_enable off)
    413 too_large (the body)      MESSAGE_BODY_TOO_LARGE
    413 too_large (keys, tags, properties)  MESSAGE_PROPERTIES_TOO_LARGE
    429                           TOO_MANY_REQUESTS
    503 kafka_unavailable         MASTER_PERSISTENCE_TIMEOUT (not durable: send again)
    any other 4xx                 BAD_REQUEST
"""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2 as pb

from coordinator.core.errors import IngressWriteError, RecordTooLargeError
from coordinator.rest.errors import ApiError, printable, write_failure

__all__ = ["RefusedError", "code_of", "ok", "refused_status", "status"]

Code = pb.Code
#: The longest message a Status carries (a validation error may name a long value).
MAX_MESSAGE_CHARACTERS = 1024


class RefusedError(Exception):
    """A request answered with `code` (a RocketMQ Code) and `message`, changing nothing."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: int, message: str) -> pb.Status:
    """Return a Status of `code` with `message` (printable, bounded)."""
    text = printable(message)
    if len(text) > MAX_MESSAGE_CHARACTERS:
        text = text[: MAX_MESSAGE_CHARACTERS - 1] + "…"
    return pb.Status(code=code, message=text)


def ok() -> pb.Status:
    """Return the Status of a request done."""
    return pb.Status(code=Code.OK, message="OK")


def code_of(error: ApiError) -> int:
    """Return the RocketMQ Code of a REST refusal (the module's table)."""
    if error.status == 401:
        return int(Code.UNAUTHORIZED)
    if error.status == 403:
        return int(Code.FORBIDDEN)
    if error.code == "topic_not_allowed":
        return int(Code.TOPIC_NOT_FOUND)
    if error.status == 413:
        body = "body" in error.message.split(":", 1)[0]
        return int(Code.MESSAGE_BODY_TOO_LARGE if body else Code.MESSAGE_PROPERTIES_TOO_LARGE)
    if error.status == 429:
        return int(Code.TOO_MANY_REQUESTS)
    if error.status == 503:
        return int(Code.MASTER_PERSISTENCE_TIMEOUT)
    return int(Code.BAD_REQUEST)


def refused_status(error: Exception) -> pb.Status:
    """Return the Status of a failure of the REST service layer (ApiError, a write failure)."""
    if isinstance(error, RefusedError):
        return status(error.code, error.message)
    if isinstance(error, RecordTooLargeError):
        _, name = write_failure(error)
        return status(Code.MESSAGE_BODY_TOO_LARGE, f"{name}: {error}")
    if isinstance(error, IngressWriteError):
        # Not durable. The detail (broker addresses) is the operator's, in the log.
        return status(
            Code.MASTER_PERSISTENCE_TIMEOUT, "not stored: Kafka cannot be reached now; send again"
        )
    if isinstance(error, ApiError):
        return status(code_of(error), error.message)
    raise TypeError(f"not a refusal: {error!r}")
