"""The OpenAPI document, with the errors this API really answers.

FastAPI documents a 422 with its own body for every route that takes parameters; this API
answers 400 (and 401, 403, 404, 409, 413, 415, 429, 503) with `ErrorBody` instead, so the generated
document is rewritten once: clients and property-based tests then see the true contract.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from coordinator.rest.models import ErrorBody

_DESCRIPTIONS = {
    400: "Bad input: bad_json, invalid_request or invalid_topic; the message names the field",
    401: "No valid bearer token",
    403: "The token may not act for this producer group, may not consume as this consumer "
    "group on this topic (the message names the grant to add), or the call needs an admin "
    "token; or (topic_limit) a half would bring in a topic past max_topics or "
    "max_topics_per_group",
    404: "Unknown transaction",
    409: "subscription_conflict: this member reads another subscription (topic, tag "
    "expression, orderly), fixed by its first receive; use another member id",
    413: "A body larger than max_message_size, or a request larger than rest.max_request_size",
    415: "The request body is not JSON",
    429: "The group or the token holds its share of the long-poll slots (too_many_polls), or "
    "of the REST consumer members (too_many_consumers), or all are taken; or the member holds "
    "as many unacknowledged messages as it may (too_many_unacked: ack some); or the token has "
    "rest.max_reads_per_token lookups, acks and changes of invisible duration in flight "
    "(too_many_requests); retry after Retry-After seconds",
    503: "Kafka (or the warehouse) cannot be reached; nothing was acknowledged, retry",
}


def _statuses(path: str, method: str) -> list[int]:
    """Return the error statuses of one operation."""
    if not path.startswith("/v1/"):
        return []
    statuses = [400, 401, 403, 503]
    if method == "post":
        statuses += [413, 415]
    elif path.startswith("/v1/transactions/"):
        statuses += [404, 429]  # 429: the token's reads in flight
    elif path == "/v1/check-requests":
        statuses += [429]
    if path.startswith("/v1/consumer-groups/"):
        statuses.remove(503)  # ack and change-invisible-duration touch neither Kafka nor Delta
        statuses += [429]  # a receive: its long polls and members; the others: reads in flight
        if path.endswith("/receive"):
            statuses += [409, 503]
    return sorted(statuses)


def install_openapi(app: FastAPI) -> None:
    """Make `app` serve the rewritten document at /openapi.json."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas["ErrorBody"] = ErrorBody.model_json_schema()
            for name in ("HTTPValidationError", "ValidationError"):
                schemas.pop(name, None)
            error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
            for path, operations in document.get("paths", {}).items():
                for method, operation in operations.items():
                    responses = operation.setdefault("responses", {})
                    responses.pop("422", None)
                    for status in _statuses(path, method):
                        responses[str(status)] = {
                            "description": _DESCRIPTIONS[status],
                            "content": error,
                        }
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
