"""The Python SDK of contract 5.3: RocketMQ's transactional producer contract, Pythonic names.

See coordinator/sdk/producer.py for a usage example. Importing this package connects to
nothing; `TransactionProducer.start()` does. It imports only core and protocol (no Spark:
tests/test_layers.py). The transports load on demand (a REST producer never imports
kafka-python): `kafka_transport.KafkaTransport`, `rest_transport.RestTransport`.
"""

from coordinator.sdk.check_answerer import CheckAnswerer, CheckStats
from coordinator.sdk.errors import (
    ProducerStateError,
    RequestRejectedError,
    SdkError,
    ServerError,
    TransportError,
)
from coordinator.sdk.listener import TransactionListener
from coordinator.sdk.memory_transport import InMemoryTransport
from coordinator.sdk.message import CheckRequest, Message, SendResult
from coordinator.sdk.producer import TransactionProducer
from coordinator.sdk.state import LocalTransactionState
from coordinator.sdk.transport import HalfReceipt, OpReceipt, SendsOps, Transport

__all__ = [
    "CheckAnswerer",
    "CheckRequest",
    "CheckStats",
    "HalfReceipt",
    "InMemoryTransport",
    "LocalTransactionState",
    "Message",
    "OpReceipt",
    "ProducerStateError",
    "RequestRejectedError",
    "SdkError",
    "SendResult",
    "SendsOps",
    "ServerError",
    "TransactionListener",
    "TransactionProducer",
    "Transport",
    "TransportError",
    "kafka_transport",
    "rest_transport",
]
