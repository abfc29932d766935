"""kafka-python's metadata refresh loop survives a request that meets a closing connection.

kafka-python 3.0 refreshes each client's metadata in a loop of its own, which carries on
after a failed refresh only if the failure is a `KafkaError`. A request sent on a connection
that is being closed (at a client's start the bootstrap connection is closed as the loop
begins; later, any connection a broker drops) fails with `RuntimeError("Transport closed for
writes")` instead: the loop ends, and `start_refresh_loop` never starts it again (its future
is set). Such a client keeps its first metadata for ever: after a partition leader moves
(a broker of a cluster restarts) its fetches and sends would never find the new leader. Seen
in CI as the ERROR line "Metadata refresh: failed Transport closed for writes"
(coordinator/core/library_logs.py).

`install` makes that failure the retriable `KafkaConnectionError` it is, so the loop backs
off (`retry_backoff_ms`) and refreshes again. It is installed before any kafka-python
client of the product is built (coordinator/kafka_clients/options.py).
"""

from __future__ import annotations

from typing import Any

from kafka import errors
from kafka.cluster import ClusterMetadata

__all__ = ["install"]

_MARK = "_txcoord_survives_closed_transport"


def install() -> None:
    """Wrap kafka-python's one metadata request (once, however often called)."""
    original = ClusterMetadata._do_refresh_metadata
    if getattr(original, _MARK, False):
        return

    async def _do_refresh_metadata(self: ClusterMetadata, node_id: Any) -> None:
        try:
            await original(self, node_id)
        except RuntimeError as exc:  # the connection was closing: retriable, as any I/O error
            raise errors.KafkaConnectionError(str(exc)) from exc

    setattr(_do_refresh_metadata, _MARK, True)
    ClusterMetadata._do_refresh_metadata = _do_refresh_metadata
