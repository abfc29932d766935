"""The engine's streams: ingest, the coordinator query, its writes, and their Kafka topics
and producers.

Streaming transforms (pure DataFrame -> DataFrame) and their readStream/writeStream edges.
Importing this package imports no module of it (nor pyspark); `__all__` lists what the
engine and the applications use, the rest is internal to the streams.
"""

__all__ = [
    "batch_gate",
    "compactor",
    "coordinator_job",
    "coordinator_writer",
    "ingress_topics",
    "kafka_producer",
    "kafka_topics",
    "progress",
    "progress_listener",
    "step_timer",
    "tally",
    "ticker",
]
