"""Every Kafka client of the product is built here, with the one `[kafka]` setting.

The settings themselves (bootstrap servers, TLS, SASL, secrets kept out of logs) are part of
the configuration: coordinator/core/kafka_security.py. What is built from them:

    options.py   what every client is built with: its security and Kafka's Java client's
                 reconnect backoff, for kafka-python and librdkafka alike (no client import:
                 the SDK uses it as is)
    producer.py  a librdkafka producer whose records are each answered on their own: the
                 REST ingress's writer and the engine's check publisher build on it
    admin.py     create and delete topics: the few admin calls the product needs
    offsets_topic.py  the consumer groups' offsets topics, created compacted (the shared
                 one, or a consumer group's own in the per-group layout)
    metadata_refresh.py  kafka-python's metadata refresh loop kept alive when a request
                 meets a closing connection (installed by `kafka_python_options`)
    join_group.py  kafka-python's group join collected when it ended between two polls,
                 not sent again (installed by `kafka_python_options`)

The clients that belong to one component stay with it and are built from these:
coordinator/sdk/kafka_transport.py (the SDK straight to Kafka), coordinator/rest/kafka_writer.py
and check_poll.py (the REST ingress), streams/kafka_io/ticker.py and check_publisher.py (the
engine). Importing this package imports none of them (the SDK never loads confluent-kafka).
"""

__all__ = ["admin", "join_group", "metadata_refresh", "offsets_topic", "options", "producer"]
