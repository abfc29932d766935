"""Prometheus metrics of one REST app, in a registry of its own (never the global one).

    txcoord_rest_requests_total{method,route,status}       answers, by route template
    txcoord_rest_request_duration_seconds{method,route}     latency histogram
    txcoord_rest_records_written_total{kind}                records Kafka acknowledged
    txcoord_rest_check_requests_delivered_total             check requests handed out
    txcoord_rest_consumer_messages_delivered_total          messages handed to REST consumers
    txcoord_rest_consumer_messages_acked_total              acks of REST consumers that counted
    txcoord_rest_consumer_members                           REST consumer members alive here
    txcoord_rest_consumer_lag{group,topic}                  messages not yet acknowledged in
                                                            the queues this process's members
                                                            read (consumers.py)
    rocketmq_consumer_lag_messages{consumer_group,topic}    every consumer group's lag, SDK and
                                                            REST members alike (RocketMQ's
                                                            name; coordinator/admin/
                                                            consumer_groups.py, read every
                                                            15 s from the first scrape on)

The route label is the template (`/v1/transactions/{transaction_id}`), or `unmatched`, and
the method label one of HTTP's methods, or `other` (the server accepts any token as a
method), so callers cannot grow the label set. The lags' (group, topic) pairs come from
clients (the members' names, whatever the offsets topic holds): only well-formed names
become labels, at most `rest.metrics_max_series` series per family, the rest summed under
`(other)` (metric_labels.py). They are read at each scrape: a member closed takes its series
with it. With `rest.metrics_token_required` the endpoint needs a token (gate.py, routes.py).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coordinator.rest.metric_labels import bounded_pairs

UNMATCHED = "unmatched"
#: The methods counted by name (RFC 9110's); any other is counted as OTHER_METHOD.
METHODS = frozenset(
    {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"}
)
OTHER_METHOD = "other"
_CONVERTOR = re.compile(r":\w+}")
CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    """The counters and histograms of one app; at most `max_series` series of a lag family."""

    def __init__(self, max_series: int = 1000) -> None:
        self.max_series = max_series
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
        self.messages_delivered = Counter(
            "txcoord_rest_consumer_messages_delivered",
            "Messages handed out to REST consumers",
            registry=self.registry,
        )
        self.messages_acked = Counter(
            "txcoord_rest_consumer_messages_acked",
            "Acknowledgements of REST consumers that counted",
            registry=self.registry,
        )

    def watch_consumers(
        self, members: Callable[[], int], lag: Callable[[], Mapping[tuple[str, str], int]]
    ) -> None:
        """Report the REST consumer members and their lag, read at each scrape."""
        self.registry.register(_ConsumerGauges(members, lag, self.max_series))

    def watch_groups(self, lag: Callable[[], Mapping[tuple[str, str], int]]) -> None:
        """Report every consumer group's lag per topic, read at each scrape."""
        self.registry.register(_GroupLagGauge(lag, self.max_series))

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


class _ConsumerGauges(Collector):
    """The REST consumers' gauges, computed when scraped (nothing stale stays behind)."""

    def __init__(
        self,
        members: Callable[[], int],
        lag: Callable[[], Mapping[tuple[str, str], int]],
        max_series: int,
    ) -> None:
        self._members = members
        self._lag = lag
        self._max_series = max_series

    def collect(self) -> Iterator[Metric]:
        """Yield the members gauge and the lag per (group, topic)."""
        members = GaugeMetricFamily(
            "txcoord_rest_consumer_members", "REST consumer members alive in this process"
        )
        members.add_metric([], self._members())
        yield members
        lag = GaugeMetricFamily(
            "txcoord_rest_consumer_lag",
            "Messages not yet acknowledged in the queues read by this process's REST members",
            labels=["group", "topic"],
        )
        for (group, topic), value in sorted(bounded_pairs(self._lag(), self._max_series).items()):
            lag.add_metric([group, topic], value)
        yield lag


class _GroupLagGauge(Collector):
    """Every consumer group's lag per topic (groups that stored an offset), when scraped."""

    def __init__(self, lag: Callable[[], Mapping[tuple[str, str], int]], max_series: int) -> None:
        self._lag = lag
        self._max_series = max_series

    def collect(self) -> Iterator[Metric]:
        """Yield the lag per (consumer group, topic)."""
        lag = GaugeMetricFamily(
            "rocketmq_consumer_lag_messages",
            "Messages delivered to a topic and not yet acknowledged by a consumer group",
            labels=["consumer_group", "topic"],
        )
        for (group, topic), value in sorted(bounded_pairs(self._lag(), self._max_series).items()):
            lag.add_metric([group, topic], value)
        yield lag
