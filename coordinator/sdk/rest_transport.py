"""The REST adapter: the ingress's endpoints (contract 5.1) over httpx.

Errors: a 4xx becomes `RequestRejectedError` with the contract's `error` code and
`message`; a 5xx other than 503 becomes `ServerError` (the contract calls it a bug).
Only failures that cannot have reached the server (connection refused, connect timeout),
503 (the ingress cannot reach Kafka; nothing acknowledged) and 429 (the group holds its
share of the ingress's long polls) are retried here, with exponential backoff and jitter,
never sooner than the answer's Retry-After; anything else is raised at once so the caller
decides. The token is sent as
`Authorization: Bearer` and never logged.
"""

from __future__ import annotations

import base64
import logging
import math
import random
import ssl
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx

from coordinator.core.backoff import Backoff
from coordinator.protocol import ingress as fmt
from coordinator.sdk.errors import RequestRejectedError, SdkError, ServerError, TransportError
from coordinator.sdk.message import CheckRequest, Message
from coordinator.sdk.transport import HalfReceipt, OpReceipt

log = logging.getLogger(__name__)

#: Answers that mean "nothing done, try again later" (Kafka unavailable, too many polls).
_RETRIABLE_STATUSES = frozenset({429, 503})
#: The contract's bounds of GET /v1/check-requests.
MAX_CHECKS_PER_POLL = 500
MAX_WAIT_SECONDS = 30
#: At most this many ops in one POST /v1/ops/batch (the contract allows 1,000).
MAX_OPS_PER_CALL = 500
#: POST /v1/transactions/{id}/<op, lowercase> for each producer op kind.
_OP_PATHS = {op: op.lower() for op in fmt.OPS}


def _error_of(response: httpx.Response) -> tuple[str, str]:
    """Return (code, message) of an error response, also when it is not the contract's JSON."""
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if isinstance(payload, dict) and isinstance(payload.get("error"), str):
        return payload["error"], str(payload.get("message", ""))
    return f"http_{response.status_code}", response.text[:500]


def _retry_after(response: httpx.Response | None) -> float:
    """Return the seconds an answer's Retry-After asks for (0 when absent or not seconds)."""
    value = response.headers.get("retry-after", "") if response is not None else ""
    try:
        return min(float(value), MAX_WAIT_SECONDS)
    except ValueError:
        return 0.0


def _stored_at(payload: dict[str, Any], path: str) -> datetime:
    try:
        return datetime.fromisoformat(str(payload["stored_at"]))
    except (KeyError, ValueError) as exc:
        raise ServerError(200, f"{path}: no valid stored_at in {payload!r}") from exc


class RestTransport:
    """Transport over the REST ingress for producer group `group`."""

    def __init__(
        self,
        endpoint: str,
        group: str,
        *,
        token: str | None = None,
        cafile: str | None = None,
        timeout_seconds: float = 30.0,
        attempts: int = 4,
        backoff_initial: float = 0.2,
        backoff_maximum: float = 5.0,
        sleep: Callable[[float], None] = time.sleep,
        rand: Callable[[], float] = random.random,
        instance: str | None = None,
    ) -> None:
        """Prepare clients for `endpoint` (no request is made until the first call).

        `instance` is this producer instance's id: its halves carry it and its long polls
        name it, so the ingress hands their checks to it first (coordinator/sdk/
        check_routing.py); None sends and polls as any producer of the group.
        """
        if attempts < 1:
            raise ValueError(f"attempts must be >= 1, not {attempts}")
        self.endpoint = endpoint.rstrip("/")
        self.group = group
        self.instance = instance
        self.timeout_seconds = timeout_seconds
        self.attempts = attempts
        self._backoff = (backoff_initial, backoff_maximum)
        self._sleep = sleep
        self._rand = rand
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # An https endpoint is verified against the system's CAs, or `cafile`'s (PEM) for an
        # ingress whose certificate a private CA signed.
        verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=cafile) if cafile else True
        )
        # Separate clients: the long poll holds its connection while sends go on.
        self._client = httpx.Client(
            base_url=self.endpoint, headers=headers, timeout=timeout_seconds, verify=verify
        )
        self._poll_client = httpx.Client(
            base_url=self.endpoint, headers=headers, timeout=timeout_seconds, verify=verify
        )

    def _request(
        self,
        method: str,
        path: str,
        *,
        client: httpx.Client | None = None,
        body: dict[str, Any] | None = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> dict[str, Any]:
        """Send one request, retrying connection failures and 503; return the JSON answer."""
        backoff = Backoff(self._backoff[0], self._backoff[1], rand=self._rand)
        for attempt in range(1, self.attempts + 1):
            response = None
            try:
                response = (client or self._client).request(
                    method,
                    path,
                    json=body,
                    params=params,
                    timeout=timeout if timeout is not None else self.timeout_seconds,
                )
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                failure = TransportError(f"cannot reach the REST ingress at {self.endpoint}: {exc}")
            except httpx.HTTPError as exc:
                # The request may have reached the server: the caller decides about a retry.
                raise TransportError(
                    f"{method} {path} failed: {type(exc).__name__}: {exc}"
                ) from exc
            else:
                if response.status_code not in _RETRIABLE_STATUSES:
                    return self._result(method, path, response)
                code, message = _error_of(response)
                status = response.status_code
                failure = TransportError(f"{method} {path}: HTTP {status} {code}: {message}")
            if attempt == self.attempts:
                raise failure
            delay = max(backoff.next_delay(), _retry_after(response))
            log.warning(
                "%s (attempt %d of %d); retrying in %.2fs", failure, attempt, self.attempts, delay
            )
            self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _result(method: str, path: str, response: httpx.Response) -> dict[str, Any]:
        status = response.status_code
        if 400 <= status < 500:
            code, message = _error_of(response)
            raise RequestRejectedError(status, code, message)
        if status >= 500 or not 200 <= status < 300:
            raise ServerError(status, f"{method} {path}: {response.text[:500]}")
        try:
            payload = response.json()
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            raise ServerError(status, f"{method} {path}: not a JSON object: {response.text[:200]}")
        return payload

    def send_half(self, message: Message, transaction_id: str) -> HalfReceipt:
        """POST /v1/transactions; return once the ingress answered 201 (durable in Kafka)."""
        body: dict[str, Any] = {
            "producer_group": self.group,
            "transaction_id": transaction_id,
            "topic": message.topic,
            "body_base64": base64.b64encode(message.body).decode(),
            "keys": list(message.keys),
            "properties": dict(message.with_instance(self.instance)),
        }
        for name in ("queue_id", "tags", "check_immunity_seconds"):
            value = getattr(message, name)
            if value is not None:
                body[name] = value
        path = "/v1/transactions"
        answer = self._request("POST", path, body=body)
        return HalfReceipt(
            transaction_id=str(answer.get("transaction_id", transaction_id)),
            msg_id=str(answer.get("msg_id")),
            stored_at=_stored_at(answer, path),
            partition=answer.get("partition"),
            offset=answer.get("offset"),
        )

    def send_op(self, transaction_id: str, op: str, from_check: bool) -> OpReceipt:
        """POST /v1/transactions/{id}/commit|rollback|unknown; return once answered 202."""
        if op not in _OP_PATHS:
            raise ValueError(f"op must be one of {', '.join(_OP_PATHS)}, not {op!r}")
        path = f"/v1/transactions/{quote(transaction_id, safe='')}/{_OP_PATHS[op]}"
        answer = self._request(
            "POST", path, body={"producer_group": self.group, "from_check": from_check}
        )
        return OpReceipt(
            transaction_id=transaction_id,
            op=str(answer.get("op", op)),
            op_id=str(answer.get("op_id")),
            stored_at=_stored_at(answer, path),
        )

    def send_ops(self, ops: Sequence[tuple[str, str, bool]]) -> list[OpReceipt | SdkError]:
        """POST /v1/ops/batch, up to MAX_OPS_PER_CALL ops a call; one result per op, in order.

        An op the ingress did not store gets its item's error (503: retriable); a call that
        failed as a whole (unreachable, 503 after the retries, a 4xx) gives every op of it
        that call's error.
        """
        for _, op, _ in ops:
            if op not in _OP_PATHS:
                raise ValueError(f"op must be one of {', '.join(_OP_PATHS)}, not {op!r}")
        path = "/v1/ops/batch"
        results: list[OpReceipt | SdkError] = []
        for start in range(0, len(ops), MAX_OPS_PER_CALL):
            chunk = ops[start : start + MAX_OPS_PER_CALL]
            items = [
                {"transaction_id": tx, "op": op, "producer_group": self.group, "from_check": check}
                for tx, op, check in chunk
            ]
            try:
                answer = self._request("POST", path, body={"ops": items})
                answered = answer.get("results")
                if (
                    not isinstance(answered, list)
                    or len(answered) != len(chunk)
                    or not all(isinstance(item, dict) for item in answered)
                ):
                    raise ServerError(200, f"{path}: {len(chunk)} ops, answer {answer!r:.200}")
                stored = [self._op_result(path, item) for item in answered]
            except SdkError as exc:
                results.extend(exc for _ in chunk)
            else:
                results.extend(stored)
        return results

    @staticmethod
    def _op_result(path: str, item: dict[str, Any]) -> OpReceipt | SdkError:
        """Return one item of a batch answer as a receipt, or as the error a single op gets."""
        status = int(item.get("status", 0))
        if status == 202 and isinstance(result := item.get("result"), dict):
            return OpReceipt(
                transaction_id=str(result.get("transaction_id", item.get("transaction_id"))),
                op=str(result.get("op", item.get("op"))),
                op_id=str(result.get("op_id")),
                stored_at=_stored_at(result, path),
            )
        error = item.get("error") or {}
        code, message = str(error.get("error", f"http_{status}")), str(error.get("message", ""))
        if status in _RETRIABLE_STATUSES:
            return TransportError(f"POST {path}: HTTP {status} {code}: {message}")
        if 400 <= status < 500:
            return RequestRejectedError(status, code, message)
        return ServerError(status, f"POST {path}: item {item!r:.300}")

    def poll_checks(self, max_records: int, wait_seconds: float) -> list[CheckRequest]:
        """Long-poll GET /v1/check-requests for at most `max_records` requests."""
        if max_records <= 0:
            return []  # nothing to keep alive: the ingress holds the requests for us
        # Whole seconds, rounded up: a fractional wait rounded down to 0 would turn the long
        # poll into a busy loop against the ingress.
        wait = max(0, min(MAX_WAIT_SECONDS, math.ceil(wait_seconds)))
        params = {
            "producer_group": self.group,
            "max": min(max_records, MAX_CHECKS_PER_POLL),
            "wait_seconds": wait,
        }
        if self.instance is not None:
            params["producer_instance"] = self.instance
        answer = self._request(
            "GET",
            "/v1/check-requests",
            client=self._poll_client,
            params=params,
            timeout=self.timeout_seconds + wait,
        )
        items = answer.get("check_requests")
        if not isinstance(items, list):
            raise ServerError(200, f"GET /v1/check-requests: no check_requests list: {answer!r}")
        requests = []
        for item in items:
            try:
                request = CheckRequest.from_json(item)
            except ValueError as exc:
                log.warning("skipping malformed check request from the ingress: %s", exc)
                continue
            if request.producer_group != self.group:
                log.warning("skipping check request of group %s", request.producer_group)
                continue
            requests.append(request)
        return requests

    def acknowledge(self, request: CheckRequest) -> None:
        """Do nothing: the ingress hands each request out once; a lost answer is rechecked."""

    def close(self) -> None:
        """Close both HTTP clients."""
        self._client.close()
        self._poll_client.close()
