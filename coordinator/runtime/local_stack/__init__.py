"""The local stack of `txcoord up`.

kafka_broker.py  the KRaft broker: format, start, health, stop (open, or secured)
kafka_cluster.py three KRaft nodes replicating every topic, as production does
spark_cluster.py a Spark standalone master and its workers
s3_server.py     an S3 API (moto's server) for a warehouse on s3a://
cluster_profile.py `txcoord up --cluster`: all of these, the coordinator submitted to them
broker_auth.py   the auth file's Kafka part: SCRAM principals, TLS, ACLs
health.py        probes that prove each part with a real round trip
ports.py         ports for its listeners, chosen below the kernel's ephemeral range
stack.py         the stack itself: broker, Spark, the streams and the REST ingress
"""

__all__ = ["broker_auth", "kafka_broker", "ports", "stack"]
