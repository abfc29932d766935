"""The warehouse: one module per Delta table (name, schema, properties, create-if-absent).

<warehouse>/system/half_messages   half messages and ingest heartbeats (ingest writes)
<warehouse>/system/op_records      COMMIT / ROLLBACK / UNKNOWN ops and heartbeats (ingest)
<warehouse>/system/quarantine      ingress records that failed to parse or validate (ingest)
<warehouse>/system/check_requests  every check request sent (coordinator)
<warehouse>/system/transactions    one row per final state reached (coordinator)
<warehouse>/system/discarded       halves given up on, kept for resume (coordinator)
<warehouse>/system/op_verdicts     what each op did: applied, duplicate, late... (coordinator)
<warehouse>/system/queue_offsets   next queue offset per (topic, queue) (coordinator)
<warehouse>/system/writers        one row per coordinator start: its writer epoch (fencing)
<warehouse>/system/known_topics   topics halves brought in, and by which group (topic limits)
<warehouse>/topics/<topic>         delivered messages with dense queue offsets (coordinator)

registry.py creates the system tables; log_retention.py gives every table the history it
keeps (`streams.log_retention`); lookup.py reads a transaction's state from them
without a JVM (deltalake), for the REST ingress and the operator commands, each table
refreshed by one reader while the others read (snapshots.py); object_store.py
lists a warehouse and its logs on local disk or on an S3 API (Arrow's file systems).
"""

__all__ = [
    "check_requests",
    "columns",
    "discarded",
    "half_messages",
    "known_topics",
    "log_retention",
    "lookup",
    "object_store",
    "op_records",
    "op_verdicts",
    "quarantine",
    "queue_offsets",
    "registry",
    "snapshots",
    "table",
    "topics",
    "transactions",
    "writers",
]
