"""The core layer: configuration, errors, the state machine and failpoints.

Pure Python (the standard library only; tests/test_layers.py checks it), so the SDK, the
protocol, the engine and the applications all build on it without pulling Spark or Kafka.

    backoff.py        exponential backoff with jitter (clients and starts that retry together)
    certificate_subject.py  a TLS client certificate's subject: Kafka's principal for it
    config.py         the configuration of contract 4 (TOML, TXCOORD_* variables, --set)
    errors.py         txcoord's exceptions
    state_machine.py  a transaction's states, the events that move it, and the legal moves
    failpoints.py     named points where the crash tests freeze or kill the coordinator
    kafka_security.py TLS/SASL settings of every Kafka client, secrets kept out of logs
    library_logs.py   a client library's transient ERROR logged as the WARNING it is
    listen_safety.py  where a server taking credentials may listen: open on loopback, TLS beyond
    secret_files.py   files holding a secret are readable by their owner only
    topics.py         which Kafka topic carries what: shared, or one set per producer group
"""

__all__ = [
    "backoff",
    "certificate_subject",
    "config",
    "errors",
    "failpoints",
    "kafka_security",
    "library_logs",
    "listen_safety",
    "secret_files",
    "state_machine",
    "topics",
]
