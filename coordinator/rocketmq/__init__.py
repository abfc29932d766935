"""The RocketMQ 5 gRPC endpoint (apache.rocketmq.v2.MessagingService; docs/rocketmq.md): the
official RocketMQ clients' transactional producers, simple and push consumers, unchanged but for
the endpoint.

An application beside the REST ingress (coordinator/rest), on its service layer: a half
sent here is validated and made durable exactly as POST /v1/transactions, an EndTransaction
is the op record of POST /v1/transactions/{id}/commit, and the check-backs come from the
same check topic. The protocol's generated modules are rocketmq-python-client's
(`rocketmq.grpc_protocol`). One module per job:

    codes.py        every refusal as a RocketMQ Code: the REST errors' table
    credentials.py  the client's signature (MQv2-HMAC-SHA1) checked against the auth file
    messages.py     a RocketMQ message <-> a half, a check request -> a check-back (pure)
    telemetry.py    the live Telemetry streams, and the check-backs pushed to them
    unsupported.py  the calls answered NOT_IMPLEMENTED / UNSUPPORTED
    calls.py        what every call shares: its parts, authentication, refusals as Codes
    consumers.py    a SimpleConsumer's and a PushConsumer's calls, onto the REST ingress's
                    consumers (contract 5.5)
    push.py         the push consumers' clients: their Settings, filters and assignments
    service.py      the MessagingService calls of a transactional producer
    server.py       Endpoint: the gRPC server of a configuration, started and stopped

`python -m coordinator.rocketmq --config FILE --set key=value` runs it standalone;
`txcoord up` runs it beside the REST ingress (`[grpc]`). Importing this package touches
neither the network nor Kafka, nor loads gRPC.
"""

__all__ = [
    "calls",
    "codes",
    "consumers",
    "credentials",
    "messages",
    "push",
    "server",
    "service",
    "telemetry",
    "unsupported",
]
