"""The Python SDK of contract 5.3: RocketMQ's transactional producer contract, Pythonic names.

Importing this package connects to nothing; `TransactionProducer.start()` does. It imports
only core, protocol and the Kafka client options of coordinator/kafka_clients/options.py (no
Spark, nothing of the engine: tests/test_layers.py).

    producer.py          TransactionProducer: send in a transaction, answer checks (example)
    listener.py          TransactionListener: the application's local transaction and check
    state.py             LocalTransactionState (COMMIT_MESSAGE, ROLLBACK_MESSAGE, UNKNOW(N))
    message.py           Message, SendResult, CheckRequest
    errors.py            what a producer may catch, and which errors are worth a retry
    transport.py         what a transport does (Transport, SendsOps) and its receipts
    kafka_transport.py   straight to Kafka (loaded on demand: a REST producer never
                         imports kafka-python)
    rest_transport.py    through the REST ingress (loaded on demand)
    memory_transport.py  an in-memory transport for tests of an application's listener
    consumer/            consumers of committed messages (contract 5.5): SimpleConsumer,
                         PushConsumer (loaded on demand: the `consumer` extra's delta-rs)
    check_answerer.py    the background check loop; inside it, ledger.py (requests in flight
                         or answered lately: a duplicate is skipped), offsets.py (which
                         check-topic offsets may be committed); retries back off with
                         jitter (coordinator/core/backoff.py)
    check_routing.py     checks go first to the instance that sent the half: the partition
                         owner's hold of another instance's checks, released by its claim
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
    "consumer",
    "kafka_transport",
    "rest_transport",
]
