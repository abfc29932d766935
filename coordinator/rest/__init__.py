"""The REST ingress (contract 5.1): halves and op records over HTTP, made durable in Kafka;
and receive/ack of committed messages for clients that are not Python (contract 5.5).

One module per job:

    models.py       request and response bodies; strict types and the ingest's rules
    records.py      a validated request -> the Kafka record the ingest parses (pure)
    auth.py         the token file: who may produce, consume (group, topic) or administer
    kafka_writer.py one idempotent acks=all producer; answers only after the broker's ack
    check_poll.py   long polls on the check topic, one consumer per producer group
    poll_slots.py   long-poll slots shared fairly between groups and tokens (429 past a share)
    in_flight.py    whose share a request counts against; a cap on each one's reads in flight
    pools.py        the threads routes run on: sends apart from reads, reads within a share
    consumers.py    REST consumer members: one SimpleConsumer per (group, member), closed
                    when idle, capped per group, per token and in all
    receipts.py     the receipt strings handed to REST consumers: opaque, signed, bound to
                    their member
    instance_ids.py producer instance ids bound to the token that names them
    topic_limits.py new topics past max_topics (or per group) refused before Kafka
    metric_labels.py  client-chosen names made metric labels: well formed, bounded in count
    host_guard.py   open mode: only requests whose Host names this machine (DNS rebinding)
    gate.py         authentication from the Authorization header, before any body is read
    limits.py       request size and content type, checked before any parsing; only routes
                    that take a body have theirs read
    errors.py       every failure -> {"error": code, "message": text} with its status
    metrics.py      Prometheus counters and latencies, one registry per app
    openapi.py      the error answers written into the OpenAPI document
    services.py     what the routes need, as one injectable object
    routes.py       the endpoints
    consumer_routes.py  the consumers' endpoints: receive, ack, change-invisible-duration
    app.py          create_app (dependencies injectable), build_server and serve (uvicorn)

`python -m coordinator.rest --config FILE --set key=value` runs it standalone. Importing
this package touches neither the network nor Kafka.
"""

# The RocketMQ gRPC endpoint (coordinator/rocketmq) reuses the service layer below the routes:
# the same validation and durability for a half, the same op records, the same check polls.
__all__ = [
    "app",
    "auth",
    "check_poll",
    "consumers",
    "errors",
    "in_flight",
    "instance_ids",
    "kafka_writer",
    "models",
    "poll_slots",
    "records",
    "routes",
    "services",
]
