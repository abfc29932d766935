"""`txcoord bench`: the benchmark of SPEC section 8, one job per module.

runner.py        orchestrates one run: broker, Spark, engine, REST, then each phase
workload.py      the mix of transaction kinds and their ids (pure)
pacing.py        how many transactions may be sent now: in-flight window, target rate (pure)
load.py          the load process (a child process: its own GIL and CPU accounting)
kafka_driver.py  halves + ops in the Kafka ingress format, pipelined, op acks timed
rest_driver.py   the same through the REST ingress's batch endpoints
responder.py     answers check requests for the checked-then-* kinds (the SDK's loop)
outcomes.py      what the coordinator decided, and check timeliness (Delta, no JVM)
visibility.py    when each row became visible in topics/<topic> (its Delta commit)
batches.py       every micro-batch's progress, with wall time; where the time went
pending.py       batch duration against unresolved (pending) state
peer.py          the peer: kafka-python's transactional producer, read_committed consumer
ceiling.py       the substrate's ceiling: raw Kafka -> Delta append, no join
resources.py     CPU seconds and peak RSS per process (/proc)
stats.py         percentiles and rates (pure)
report.py        JSON + markdown summary;  plot.py: the PNG
"""

#: What `txcoord bench` (coordinator/commands/bench.py) uses; the rest is internal.
__all__ = ["context", "report", "runner", "workload"]
