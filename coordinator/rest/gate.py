"""Authentication at the door: who calls is decided from the Authorization header alone.

A pure ASGI middleware in front of everything that reads a body (limits.py, FastAPI), so a
request without a valid token gets its 401 before one byte of its body is read (contract 5.1):
an anonymous caller cannot make the ingress buffer or parse 16 MiB. Every `/v1/` route
needs a token, and /metrics with `rest.metrics_token_required` (it names every consumer
group and topic; routes.py then asks for the `metrics` right); /healthz and /openapi.json do
not. The Principal found is kept in the request's state, where routes.py reads it; nothing
else authenticates.
"""

from __future__ import annotations

from fastapi.security.utils import get_authorization_scheme_param
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from coordinator.rest.auth import Authenticator, Principal
from coordinator.rest.errors import ApiError, error_response

#: Where the gate puts the caller (scope["state"], i.e. request.state.principal).
PRINCIPAL = "principal"
PROTECTED_PREFIX = "/v1/"
METRICS_PATH = "/metrics"


def bearer_token(authorization: str | None) -> str | None:
    """Return the token of an `Authorization: Bearer <token>` header, or None."""
    scheme, token = get_authorization_scheme_param(authorization)
    return token if scheme.lower() == "bearer" and token else None


class AuthGate:
    """Answer 401 to a /v1/ request (and one of /metrics, with `protect_metrics`) without a
    valid token, before its body is received."""

    def __init__(self, app: ASGIApp, auth: Authenticator, protect_metrics: bool = False) -> None:
        self.app = app
        self.auth = auth
        self.protect_metrics = protect_metrics

    def _protects(self, path: str) -> bool:
        return path.startswith(PROTECTED_PREFIX) or (self.protect_metrics and path == METRICS_PATH)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._protects(scope["path"]):
            await self.app(scope, receive, send)
            return
        authorization = Headers(scope=scope).get("authorization")
        try:
            principal = self.auth.authenticate(bearer_token(authorization))
        except ApiError as refused:
            # receive() is never called: the body stays unread and the server closes the
            # connection after this answer (HTTP/1.1 cannot reuse it with a body pending).
            response = error_response(
                refused.status, refused.code, refused.message, refused.headers
            )
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})[PRINCIPAL] = principal
        await self.app(scope, receive, send)


def principal_of(scope: Scope) -> Principal:
    """Return the caller the gate let in (a route behind the gate always has one)."""
    principal = scope.get("state", {}).get(PRINCIPAL)
    if not isinstance(principal, Principal):
        raise ApiError(401, "unauthorized", "send Authorization: Bearer <token>")
    return principal
