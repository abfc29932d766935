"""Errors the SDK raises, so callers can decide retry-or-give-up by class.

    TxcoordError                    coordinator/core/errors.py
    └── SdkError                    base of every SDK error
        ├── TransportError          Kafka or the REST ingress could not be reached (retriable)
        ├── RequestRejectedError    the REST ingress refused the request: a 4xx with a code
        ├── ServerError             the REST ingress failed with a 5xx other than 503 (a bug)
        └── ProducerStateError      the producer is not started, or already shut down

Each error carries `retriable`: True when the same call may succeed later unchanged.
"""

from __future__ import annotations

from coordinator.core.errors import TxcoordError


class SdkError(TxcoordError):
    """Base class of every error the SDK raises deliberately."""

    retriable = False


class TransportError(SdkError):
    """The transport could not deliver the call (broker or ingress unreachable, timeout, 503)."""

    def __init__(self, message: str, *, retriable: bool = True) -> None:
        super().__init__(message)
        self.retriable = retriable


class RequestRejectedError(SdkError):
    """The REST ingress answered 4xx: `status`, its `code` (e.g. "forbidden") and `detail`."""

    def __init__(self, status: int, code: str, detail: str) -> None:
        super().__init__(f"HTTP {status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail


class ServerError(SdkError):
    """The REST ingress answered a 5xx other than 503; the contract says that is a bug."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(f"HTTP {status} from the REST ingress (a server bug): {detail}")
        self.status = status
        self.detail = detail


class ProducerStateError(SdkError):
    """A producer call came before `start()` or after `shutdown()`."""
