"""`txcoord bench`: the benchmark of docs/contract.md section 8, one job per module.

runner.py        orchestrates one run: broker, Spark, engine, REST, then each phase
context.py       what every phase is given: the settings, the engine under test, the reporter
workload.py      the mix of transaction kinds and their ids (pure)
pacing.py        how many transactions may be sent now: in-flight window, target rate (pure)
load.py          the load process (a child process: its own GIL and CPU accounting)
kafka_driver.py  halves + ops in the Kafka ingress format, pipelined, op acks timed
rest_driver.py   the same through the REST ingress's batch endpoints
responder.py     answers check requests for the checked kinds (the SDK's loop)
throughput.py    one path's phase: drive the load, wait for every decision, judge it
outcomes.py      what was decided; first and later checks' timeliness (Delta, no JVM)
visibility.py    when each row became visible in topics/<topic> (its Delta commit)
consume.py       commit→consumed beside commit→visible (consumer_process.py: an SDK consumer)
s3_model.py      what a real object store's latency would do to the S3 phase's figures
batches.py       every micro-batch's progress, with wall time; where the time went
pending.py       batch duration against unresolved (pending) state
rebuild.py       how long `txcoord state rebuild` takes with that state, both ways
jit.py           the Spark JVM's JIT compilers: warm-up until they settle, and each phase's cost
peer.py          the peer: kafka-python's transactional producer, read_committed consumer
java_peer.py     the Java peer: Kafka's own ProducerPerformance, transactional
grpc_driver.py   the gRPC path: RocketMQ's Java client (RocketMqBench.java) against the endpoint
ceiling.py       the substrate's ceiling: raw Kafka -> Delta append, no join
resources.py     CPU seconds and peak RSS per process (/proc)
cpu_cost.py      CPU per decided transaction, and the same in Java peer records
stats.py         percentiles and rates (pure)
report.py        JSON + markdown summary;  plot.py: the PNG
"""

#: What `txcoord bench` (coordinator/commands/bench.py) uses; the rest is internal.
__all__ = ["context", "report", "runner", "workload"]
