"""Every failure of a request becomes `{"error": code, "message": text}` with its status.

    ApiError (raised by the routes)        its own status and code
    HostGuard (open mode, host_guard.py)   421 misdirected_request: Host names another machine
    RequestValidationError (FastAPI)       400 bad_json | invalid_request | invalid_topic,
                                           413 too_large; the message names the field
    HTTPException (Starlette routing)      400 bad_json, 404 not_found, 405 method_not_allowed
    KafkaUnavailableError                  503 kafka_unavailable (retry; nothing acknowledged)
    RecordTooLargeError                    413 too_large
    (both also per item of a batch: `write_failure`, see routes.py)
    anything else                          500 internal_error: always a bug, logged

A message never repeats a token and never carries a lone surrogate (it could not be encoded
as UTF-8, and the error answer itself would fail).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from coordinator.core.errors import KafkaUnavailableError, RecordTooLargeError
from coordinator.rest.models import INVALID_TOPIC

log = logging.getLogger("txcoord.rest")

#: Errors named in one message at most; a batch may have thousands.
_MAX_LISTED = 5
#: Pydantic error types answered with their own status and code.
_CODES = {
    "json_invalid": (400, "bad_json"),
    INVALID_TOPIC: (400, "invalid_topic"),
}
_HTTP_CODES = {
    400: "bad_json",  # FastAPI's answer to a body it could not decode at all
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
    429: "too_many_polls",
}


class ApiError(Exception):
    """A request the API refuses: an HTTP status, a stable code and a message."""

    def __init__(
        self, status: int, code: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = dict(headers or {})


def printable(text: str) -> str:
    """Return `text` with anything UTF-8 cannot encode (lone surrogates) escaped."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_response(
    status: int, code: str, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    """Return the JSON error answer."""
    body = {"error": code, "message": printable(message)}
    return JSONResponse(body, status_code=status, headers=dict(headers or {}))


def field_name(loc: Sequence[Any]) -> str:
    """Return a pydantic location as a field path, e.g. `messages[3].topic`."""
    where, *path = loc or ("body",)
    name = ""
    for part in path:
        name += f"[{part}]" if isinstance(part, int) else (f".{part}" if name else str(part))
    if where == "body":
        return name or "body"
    return f"{name or where} ({where})"


def validation_response(errors: Sequence[Mapping[str, Any]]) -> JSONResponse:
    """Return the answer to a request that failed validation."""
    first: Mapping[str, Any] = errors[0] if errors else {"type": "missing", "loc": ("body",)}
    status, code = _CODES.get(str(first.get("type")), (400, "invalid_request"))
    if code == "bad_json":
        context = first.get("ctx") or {}
        position = first["loc"][1] if len(first.get("loc", ())) > 1 else "?"
        detail = context.get("error", "JSON decode error")
        return error_response(status, code, f"the body is not valid JSON: {detail} at {position}")
    parts = [f"{field_name(e.get('loc', ()))}: {e.get('msg')}" for e in errors[:_MAX_LISTED]]
    more = len(errors) - _MAX_LISTED
    if more > 0:
        parts.append(f"and {more} more")
    return error_response(status, code, "; ".join(parts))


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return validation_response(list(exc.errors()))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    message = {
        "bad_json": "the body could not be decoded (it must be UTF-8 JSON)",
        "not_found": f"no such endpoint: {request.method} {request.url.path}",
        "method_not_allowed": f"{request.method} is not allowed on {request.url.path}",
    }.get(code, str(exc.detail))
    status = exc.status_code if 400 <= exc.status_code < 600 else 400
    return error_response(status, code, message, exc.headers)


#: What a 503 says: nothing of the ingress's insides (addresses, exception texts).
UNAVAILABLE_TEXT = (
    "Kafka is not reachable from the ingress right now: nothing was acknowledged; retry"
)
#: What a consumer's 503 says.
CONSUMER_UNAVAILABLE_TEXT = (
    "the consumer cannot read Kafka or the warehouse right now: nothing was handed out; retry"
)


def write_failure(exc: KafkaUnavailableError | RecordTooLargeError) -> tuple[int, str]:
    """Return the (status, code) of a record Kafka did not acknowledge."""
    if isinstance(exc, RecordTooLargeError):
        return 413, "too_large"
    return 503, "kafka_unavailable"


async def _write_failed(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, KafkaUnavailableError | RecordTooLargeError)
    status, code = write_failure(exc)
    if status == 503:
        # The detail (broker addresses, the client's exception) is the operator's, in the log:
        # a client is told what to do, not where the brokers are.
        log.warning("kafka unavailable during %s %s: %s", request.method, request.url.path, exc)
        return error_response(status, code, UNAVAILABLE_TEXT, {"Retry-After": "1"})
    return error_response(status, code, str(exc))


async def _internal_error(request: Request, exc: Exception) -> JSONResponse:
    log.exception("bug: unhandled error during %s %s", request.method, request.url.path)
    return error_response(500, "internal_error", f"internal error ({type(exc).__name__})")


def install_error_handlers(app: FastAPI) -> None:
    """Answer every failure of `app` with the contract's JSON error shape."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HTTPException, _http_error)
    app.add_exception_handler(KafkaUnavailableError, _write_failed)
    app.add_exception_handler(RecordTooLargeError, _write_failed)
    app.add_exception_handler(Exception, _internal_error)
