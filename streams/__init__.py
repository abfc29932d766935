"""The engine's streams: the coordinator query, its writes, and their Kafka topics and producers.

Streaming transforms (pure DataFrame -> DataFrame) and their readStream/writeStream edges.
Importing this package imports no module of it (nor pyspark); `__all__` lists what the
engine and the applications use, the rest is internal to the streams.

The query
    coordinator_job.py     one query lands every ingress record and decides every transaction
    ingest.py              Kafka ingress records -> halves, ops, quarantine (pure transforms)
    ingest_rules.py        what the JVM's ingest rules (txcoord.Ingress) are given
    topic_admission.py     the new topics halves may bring in (max_topics, per group)
    coordinator_stage.py   the stateful stage: PySpark's handle on its JVM processor (jvm/)
    lifecycle.py           what the stage is given (Rules) and the rows it emits (Kind)
    landing.py             LAND rows: the batch's raw records, riding with the decisions
Its checkpoint
    coordinator_checkpoint.py  its generations, and what each holds (Spark's own files)
    checkpoint_files.py    a checkpoint's small files, local or through Hadoop
    state_rebuild.py       a new generation with the state moved (rescale, rebuild, upgrade)
    warehouse_state.py     the state derived from the warehouse alone
    landing_repair.py      a rebuild lands what a crash left unlanded; Kafka is read on after it
    decision_repair.py     a rebuild writes the final states and verdicts a crash left unwritten
    state_derivation.py    one transaction's state from its rows of the tables (pure)
Its writes (foreachBatch)
    coordinator_writer.py  the stage's rows -> Delta tables and the check topic
    ingest_job.py          landing: a batch's ingress records -> three Delta tables
    landing_coverage.py    which ingress records are landed, recorded in every landing commit
    delta_writes.py        idempotent Delta appends: the exactly-once half of every write
    writer_fence.py        writer epochs: a newer coordinator fences every older one's writes
    batch_collect.py       a batch's rows brought into the driver as one Arrow table
    arrow_rows.py          those rows shaped for each table
    parallel_writes.py     independent writes of one batch, side by side
    batch_gate.py          a stop that lets the batch in flight finish
    compactor.py           the output tables' small files folded, off the batch's path
Kafka
    check_publisher.py     check requests published on the check topics (at least once)
    check_topic.py         the check topic's records, sized to fit every accepted half
    delivery_notices.py    each delivering batch's queue ends, for consumers (best effort)
    kafka_fence.py         those two sent in Kafka transactions a newer coordinator fences
    ingress_topics.py      the ingress and check topics, created with the settings needed
    outage.py              an engine stopped longer than the ingress topics keep records
    ticker.py              heartbeats into the ingress topics: event time moves when quiet
    tick_pace.py           how often: every tick while a timer may be near, rarely if not
What it did
    progress.py            one JSON log line per micro-batch, and late-row totals
    progress_listener.py   a listener receiving each batch's progress as one document
    step_timer.py          where a foreachBatch call spends its time
    tally.py               running counts for the status line and the metrics
"""

__all__ = [
    "batch_gate",
    "compactor",
    "coordinator_checkpoint",
    "coordinator_job",
    "coordinator_writer",
    "decision_repair",
    "delivery_notices",
    "ingress_topics",
    "landing_repair",
    "outage",
    "progress",
    "progress_listener",
    "state_rebuild",
    "step_timer",
    "tally",
    "ticker",
]
