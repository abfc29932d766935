"""Request size and content type, checked before FastAPI parses anything.

A body larger than `rest.max_request_size` is refused with 413 as soon as it is known to be
(from Content-Length, or while it streams in), so an oversize request never reaches the
JSON parser. A request body must be JSON: anything else is 415 (FastAPI would otherwise
treat it as raw bytes and the error would say nothing useful).

Only the routes that take a body have theirs read: a POST under `/v1/`, whose caller the
gate (gate.py) has already authenticated. Anything else (a POST to /healthz, to an unknown
path) goes to the router unread and gets its 404 or 405 while the body is still on the
wire: an anonymous caller cannot make the ingress buffer a body no route takes.
"""

from __future__ import annotations

from email.message import Message as MimeMessage

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coordinator.rest.errors import error_response
from coordinator.rest.gate import PROTECTED_PREFIX


def takes_body(scope: Scope) -> bool:
    """Return True for a request to a route that reads a body: POST under /v1/."""
    path: str = scope["path"]
    return scope["method"] == "POST" and path.startswith(PROTECTED_PREFIX)


def is_json(content_type: str | None) -> bool:
    """Return True for application/json and application/*+json, with any parameters."""
    if not content_type:
        return False
    mime = MimeMessage()
    mime["content-type"] = content_type
    subtype = mime.get_content_subtype()
    return mime.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class _TooLargeError(Exception):
    pass


class RequestLimits:
    """Refuse oversize and non-JSON request bodies with the contract's JSON errors."""

    def __init__(self, app: ASGIApp, max_request_size: int) -> None:
        self.app = app
        self.max_request_size = max_request_size

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        declared = headers.get("content-length")
        if declared and declared.strip().isdigit() and int(declared) > self.max_request_size:
            await self._too_large(scope, receive, send)
            return
        if not takes_body(scope):
            await self.app(scope, receive, send)
            return
        try:
            body, more = await self._read_body(receive)
        except _TooLargeError:
            await self._too_large(scope, receive, send)
            return
        if body and not is_json(headers.get("content-type")):
            response = error_response(
                415,
                "unsupported_media_type",
                "the request body must be JSON (Content-Type: application/json)",
            )
            await response(scope, receive, send)
            return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive() if more else {"type": "http.disconnect"}

        await self.app(scope, replay, send)

    async def _read_body(self, receive: Receive) -> tuple[bytes, bool]:
        """Return the whole body, and whether the client may still send (a disconnect)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return b"".join(chunks), False
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_request_size:
                raise _TooLargeError
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks), True

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            "too_large",
            f"the request is larger than rest.max_request_size ({self.max_request_size} bytes)",
        )
        await response(scope, receive, send)
