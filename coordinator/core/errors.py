"""Every error txcoord raises on purpose, so callers can decide by class.

    TxcoordError                  base of everything below
    ├── ConfigurationError        a setting is unknown, malformed or impossible
    ├── StackError                a local component could not be prepared or run
    │   ├── ArtifactsMissingError the Maven-resolved jars are not in the cache
    │   └── BrokerError           the local Kafka broker failed to format, start or stop
    ├── WriterFencedError         a newer coordinator took over the warehouse (contract 7.10)
    └── IngressWriteError         the REST ingress could not make a record durable
        ├── KafkaUnavailableError the broker cannot be reached or did not acknowledge in
        │                         time (retriable: the REST answers 503)
        └── RecordTooLargeError   the broker refused the record's size (the REST answers 413)

Each error's message says what went wrong and what to do about it; the CLI prints it
as is, without a traceback.
"""

from __future__ import annotations


class TxcoordError(Exception):
    """Base class of every error txcoord raises deliberately."""


class ConfigurationError(TxcoordError):
    """A setting is unknown, malformed or contradicts another one."""


class StackError(TxcoordError):
    """A local component (jars, broker, Spark) could not be prepared or run."""


class ArtifactsMissingError(StackError):
    """The JVM artifacts resolved by the install step are not where they should be."""


class BrokerError(StackError):
    """The local Kafka broker failed to format its storage, start, or become ready."""


class WriterFencedError(TxcoordError):
    """A newer coordinator claimed the warehouse's writer epoch: this one may not write."""


class IngressWriteError(TxcoordError):
    """A half or op record sent by the REST ingress was not acknowledged by Kafka."""

    retriable = False


class KafkaUnavailableError(IngressWriteError):
    """The broker cannot be reached, or did not acknowledge the record in time; retry later."""

    retriable = True


class RecordTooLargeError(IngressWriteError):
    """The broker refused the record because it exceeds the topic's max.message.bytes."""
