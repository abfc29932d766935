"""The engine's streams: one query lands every ingress record and decides every transaction.

Streaming transforms (pure DataFrame -> DataFrame) and their readStream/writeStream edges,
one subpackage per job, in the order a half message walks through them. Importing this
package imports none of them (nor pyspark). Each subpackage's `__init__` names its modules.

    ingest/     Kafka ingress records -> halves, ops, quarantine; the raw records landed
    stage/      the query and its stateful stage (PySpark's handle on the JVM processor, jvm/)
    writes/     a micro-batch's writes: the stage's rows -> Delta tables, exactly once
    kafka_io/   the engine's Kafka topics: check records, delivery notices, ticks, outages
    fence/      writer epochs and Kafka transactional ids: a newer coordinator fences an older one
    state/      the query's checkpoint generations, and the state rebuilt from the warehouse
    progress/   what each batch did: log lines, the listener, step timings, running counts
    jvm/        the stateful processor's JVM sources (txcoord.*), built by the install step
"""

__all__ = ["fence", "ingest", "kafka_io", "progress", "stage", "state", "writes"]
