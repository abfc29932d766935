"""The engine's streams: one query lands every ingress record and decides every transaction.

Streaming transforms (pure DataFrame -> DataFrame) and their readStream/writeStream edges,
one subpackage per job. Each imports only the ones listed before it, so reading them in this
order meets every name before its use. Importing this package imports none of them (nor
pyspark). Each subpackage's `__init__` names its modules.

    progress/     what each batch did: log lines, the listener, step timings, running counts
    checkpoint/   the query's checkpoint: its generations and their small files
    writes/       how a batch writes: Arrow rows, idempotent Delta appends fenced by writer
                  epochs, side by side, the stop gate, the compactor
    kafka_io/     the engine's Kafka topics: check records and delivery notices in Kafka
                  transactions a newer coordinator fences, ticks, the ingress topics, outages
    ingest/       Kafka ingress records -> halves, ops, quarantine; the raw records landed
    stage/        the stateful stage (PySpark's handle on the JVM processor, jvm/)
    query/        the decision query: reads the ingress topics, runs the stage, writes each
                  batch (its foreachBatch)
    state/        the state rebuilt from the warehouse: rescale, rebuild, a lost checkpoint
    jvm/          the stateful processor's JVM sources (txcoord.*), built by the install step
"""

__all__ = ["checkpoint", "ingest", "kafka_io", "progress", "query", "stage", "state", "writes"]
