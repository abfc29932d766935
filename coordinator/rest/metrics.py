"""Prometheus metrics of one REST app, in a registry of its own (never the global one).

    txcoord_rest_requests_total{method,route,status}       answers, by route template
    txcoord_rest_request_duration_seconds{method,route}     latency histogram
    txcoord_rest_records_written_total{kind}                records Kafka acknowledged
    txcoord_rest_check_requests_delivered_total             check requests handed out

The route label is the template (`/v1/transactions/{transaction_id}`), or `unmatched`, and
the method label one of HTTP's methods, or `other` (the server accepts any token as a
method), so callers cannot grow the label set.
"""

from __future__ import annotations

import re
import time

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "unmatched"
#: The methods counted by name (RFC 9110's); any other is counted as OTHER_METHOD.
METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
OTHER_METHOD = "other"
_CONVERTOR = re.compile(r":\w+}")
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """The counters and histograms of one app."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "txcoord_rest_requests",
            "HTTP requests answered",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "txcoord_rest_request_duration_seconds",
            "Time to answer an HTTP request",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.records = Counter(
            "txcoord_rest_records_written",
            "Records acknowledged by Kafka",
            ["kind"],
            registry=self.registry,
        )
        self.checks_delivered = Counter(
            "txcoord_rest_check_requests_delivered",
            "Check requests handed out to producers",
            registry=self.registry,
        )

    def render(self) -> bytes:
        """Return every metric in Prometheus' text format."""
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Count and time every HTTP request (pure ASGI, so streaming answers are timed whole)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers if the app fails before starting a response

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            route = scope.get("route")
            template = _CONVERTOR.sub("}", getattr(route, "path", None) or UNMATCHED)
            method = scope.get("method", "")
            method = method if method in METHODS else OTHER_METHOD
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.latency.labels(method, template).observe(time.perf_counter() - started)
