"""Prometheus metrics of the coordinator driver, read from the engine at scrape time.

RocketMQ's names where RocketMQ has the metric (rocketmq-facts.md, "Metrics (5.2+)"):

    rocketmq_half_messages{topic}              gauge: pending (undecided) halves per real topic
    rocketmq_commit_messages_total             transactions committed (by op, check or operator)
    rocketmq_rollback_messages_total           transactions rolled back
    rocketmq_finish_message_latency_seconds    histogram: half stored -> outcome recorded

and txcoord's own for the rest:

    txcoord_checking_transactions              gauge: checked at least once, not decided
    txcoord_check_requests_total               check requests sent
    txcoord_discarded_transactions_total       given up after check_max, or expired
    txcoord_half_messages_total / txcoord_op_records_total / txcoord_quarantined_records_total
    txcoord_batch_duration_seconds{query}      gauge: the last micro-batch's duration
    txcoord_batches_total{query}               micro-batches run by this driver
    txcoord_input_lag_records{query}           gauge: Kafka records behind the topic ends
    txcoord_state_rows{query}                  gauge: rows in the stateful operators
    txcoord_rows_dropped_late_total{query}     must stay 0 (contract 7.5)

Totals start from the tables at engine start (`Tally.seed`), so they survive restarts; the
latency histogram covers this driver's lifetime (Prometheus handles the reset).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from coordinator.core.errors import ConfigurationError
from streams.progress.tally import FINISH_BUCKETS_S

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from streams.progress.batch_log import ProgressLog
    from streams.progress.tally import Tally

log = logging.getLogger(__name__)


class EngineCollector(Collector):
    """Turns the engine's tally and progress log into metrics on every scrape.

    It is given the two, not the engine, so that the engine imports this module and not
    the other way round.
    """

    def __init__(self, tally: Tally, progress: ProgressLog) -> None:
        self.tally, self.progress = tally, progress

    def collect(self) -> Iterator[Metric]:
        """Yield every metric as it is now."""
        c = self.tally.snapshot()
        half = GaugeMetricFamily(
            "rocketmq_half_messages",
            "Half messages not yet committed or rolled back",
            labels=["topic"],
        )
        for topic, pending in c.pending_by_topic().items():
            half.add_metric([topic], pending)
        yield half
        yield CounterMetricFamily(
            "rocketmq_commit_messages", "Transactions committed", value=c.committed
        )
        yield CounterMetricFamily(
            "rocketmq_rollback_messages", "Transactions rolled back", value=c.rolled_back
        )
        cumulative = list(accumulate(c.finish_buckets))
        bounds = [*map(str, FINISH_BUCKETS_S), "+Inf"]
        yield HistogramMetricFamily(
            "rocketmq_finish_message_latency_seconds",
            "Seconds from a half being stored to its commit or rollback being recorded",
            buckets=list(zip(bounds, cumulative, strict=True)),
            sum_value=c.finish_seconds_total,
        )
        yield GaugeMetricFamily(
            "txcoord_checking_transactions",
            "Transactions checked and not decided yet",
            value=c.checking,
        )
        for name, text, value in (
            ("txcoord_check_requests", "Check requests sent", c.checks_sent),
            ("txcoord_discarded_transactions", "Transactions discarded", c.discarded),
            ("txcoord_half_messages", "Half messages landed", c.halves),
            ("txcoord_op_records", "Op records landed", c.ops),
            ("txcoord_quarantined_records", "Ingress records quarantined", c.quarantined),
        ):
            yield CounterMetricFamily(name, text, value=value)
        yield from self._queries()

    def _queries(self) -> Iterator[Metric]:
        progress = self.progress
        duration = GaugeMetricFamily(
            "txcoord_batch_duration_seconds", "Duration of the last micro-batch", labels=["query"]
        )
        batches = CounterMetricFamily(
            "txcoord_batches", "Micro-batches run by this driver", labels=["query"]
        )
        lag = GaugeMetricFamily(
            "txcoord_input_lag_records",
            "Kafka records behind the end of the input topics",
            labels=["query"],
        )
        state = GaugeMetricFamily(
            "txcoord_state_rows", "Rows held by the query's stateful operators", labels=["query"]
        )
        dropped = CounterMetricFamily(
            "txcoord_rows_dropped_late",
            "Rows dropped behind the watermark (must stay 0)",
            labels=["query"],
        )
        for query, last in sorted(progress.last.items()):
            duration.add_metric([query], (last.get("duration_ms") or 0) / 1000)
            batches.add_metric([query], progress.batches[query])
            lag.add_metric([query], last.get("lag") or 0)
            state.add_metric([query], last.get("state_rows") or 0)
            dropped.add_metric([query], progress.dropped_late(query))
        yield from (duration, batches, lag, state, dropped)


@dataclass
class MetricsServer:
    """The driver's /metrics endpoint (Prometheus text), on a thread of its own."""

    server: WSGIServer

    @property
    def port(self) -> int:
        """Return the port it listens on."""
        return int(self.server.server_port)

    def stop(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def serve_metrics(tally: Tally, progress: ProgressLog, host: str, port: int) -> MetricsServer:
    """Serve the engine's metrics at http://host:port/metrics (port 0: any free port)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(tally, progress))
    try:
        server, _ = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot serve metrics on {host}:{port} ({exc}); set metrics.port to a free port, "
            "0 for any, or -1 for none"
        ) from exc
    running = MetricsServer(server)
    log.info("metrics at http://%s:%d/metrics", host, running.port)
    return running
