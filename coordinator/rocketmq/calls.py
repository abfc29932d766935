"""What every call shares: who may call, and how a refusal is answered.

`Calls` holds the endpoint's parts (the REST service layer, the credentials, the live
streams) and runs each call: authenticated first (credentials.py), then its work; a refusal
is a Status with a RocketMQ Code (codes.py), a write that was not made durable is
MASTER_PERSISTENCE_TIMEOUT, and a bug is logged and answered INTERNAL_SERVER_ERROR: nothing
a client sends ends the endpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, TypeVar

from coordinator.core.errors import IngressWriteError
from coordinator.protocol.names import topic_name_problem
from coordinator.rest.auth import Principal
from coordinator.rest.errors import ApiError
from coordinator.rest.services import Services
from coordinator.rocketmq.codes import Code, RefusedError, refused_status, status
from coordinator.rocketmq.credentials import CLIENT_ID, Credentials, metadata_value
from coordinator.rocketmq.telemetry import LiveStreams
from coordinator.rocketmq.unsupported import Unsupported

__all__ = ["Calls", "client_id_of"]

log = logging.getLogger("txcoord.rocketmq")

Response = TypeVar("Response")


class Calls(Unsupported):
    """The endpoint's parts, and the frame every call runs in."""

    def __init__(self, services: Services, credentials: Credentials, streams: LiveStreams) -> None:
        self.services = services
        self.credentials = credentials
        self.streams = streams

    def _call(
        self, context: Any, response: Callable[..., Response], work: Callable[[Principal], Response]
    ) -> Response:
        """Authenticate, run `work`, and answer any refusal as a Status of `response`."""
        try:
            return work(self.credentials.authenticate(context.invocation_metadata()))
        except (RefusedError, ApiError) as exc:
            return response(status=refused_status(exc))
        except IngressWriteError as exc:
            # The detail (brokers, the client's error) is the operator's; the caller is told
            # that nothing was stored.
            log.warning("%s: not stored: %s", getattr(response, "__name__", "a call"), exc)
            return response(status=refused_status(exc))
        except Exception:
            log.exception("bug: %s", getattr(response, "__name__", "a call"))
            return response(status=status(Code.INTERNAL_SERVER_ERROR, "internal error"))

    def _topic(self, resource: Any) -> str:
        """Return the topic a call names; refuse one this endpoint cannot carry or lacks."""
        if resource.resource_namespace:
            raise RefusedError(Code.UNSUPPORTED, "resource namespaces are not supported")
        name = str(resource.name)
        if problem := topic_name_problem(name):
            raise RefusedError(Code.ILLEGAL_TOPIC, f"topic: {problem}")
        allowed = self.services.config.allowed_topics
        if allowed is not None and name not in allowed:
            raise RefusedError(
                Code.TOPIC_NOT_FOUND,
                f"topic {name!r} is not one of the configured topics (auto_create_topic_enable "
                "is off)",
            )
        return name


def client_id_of(context: Any) -> str:
    """Return the caller's client id (x-mq-client-id); refuse a call without one."""
    client_id = metadata_value(context.invocation_metadata(), CLIENT_ID)
    if not client_id:
        raise RefusedError(Code.CLIENT_ID_REQUIRED, f"the metadata {CLIENT_ID} is required")
    return client_id
