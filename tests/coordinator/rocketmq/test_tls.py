"""The endpoint over TLS (grpc.tls_certfile): the official Python client, trusting the
endpoint's CA, sends a half and commits it; plain gRPC gets no answer. Kafka only: the
client's OK is the endpoint's "durable", and the records are read back from the ingress
topics (the engine's part is the other module's)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from rocketmq.grpc_protocol import service_pb2 as service

from coordinator.protocol import ingress as fmt
from coordinator.rest.auth import sha256_hex
from tests.conftest import settings_under
from tests.coordinator.rest.kafka_io import read_all
from tests.coordinator.rocketmq.endpoint_process import RawClient, endpoint_process, tls_settings

pytestmark = [pytest.mark.kafka]

TOKEN = "payments-app-token-0123456789abc"
ACCESS_KEY = "payments-app"

#: The official client over TLS, in a process of its own that trusts the test CA (gRPC reads
#: GRPC_DEFAULT_SSL_ROOTS_FILE_PATH once): one committed transaction; prints its id.
TLS_PRODUCER = """
import sys
from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.model import Message
from rocketmq.v5.producer import Producer, TransactionChecker

class Never(TransactionChecker):
    def check(self, message):
        raise RuntimeError("committed at once: never checked")

address, access_key, secret_key, topic = sys.argv[1:]
credentials = Credentials(access_key, secret_key)
configuration = ClientConfiguration(address, credentials, request_timeout=10)
producer = Producer(configuration, (topic,), Never(), tls_enable=True)
producer.startup()
transaction = producer.begin_transaction()
message = Message()
message.topic, message.body, message.keys = topic, b"over TLS", "tls"
receipt = producer.send(message, transaction)
transaction.commit()
producer.shutdown()
print(receipt.transaction_id)
"""


@pytest.fixture
def tls_endpoint(bootstrap_servers: str, tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    auth_file = tmp_path / "auth.toml"
    auth_file.write_text(
        f'[[token]]\nname = "{ACCESS_KEY}"\ngroup = "payments"\nsha256 = "{sha256_hex(TOKEN)}"\n'
    )
    auth_file.chmod(0o600)
    settings = settings_under(
        tmp_path,
        bootstrap_servers,
        **{"rest.auth_file": str(auth_file), **tls_settings(tmp_path / "tls")},
    )
    with endpoint_process(settings) as address:
        yield address, settings


def test_over_tls_the_official_client_sends_and_commits(
    tls_endpoint: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    address, settings = tls_endpoint
    plain = RawClient(address, ACCESS_KEY, sha256_hex(TOKEN))
    try:
        with pytest.raises(grpc.RpcError):  # plain gRPC gets no answer from a TLS endpoint
            plain.call("Heartbeat", service.HeartbeatRequest())
    finally:
        plain.close()
    ran = subprocess.run(
        [sys.executable, "-c", TLS_PRODUCER, address, ACCESS_KEY, sha256_hex(TOKEN), "Payments"],
        env={**os.environ, "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(tmp_path / "tls" / "ca.pem")},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr[-4000:]
    transaction_id = ran.stdout.strip().splitlines()[-1]
    servers = settings["kafka.bootstrap_servers"]
    (half,) = [
        r
        for r in read_all(servers, settings["kafka.half_topic"])
        if r.key == transaction_id.encode()
    ]
    assert half.value == b"over TLS"
    assert dict(half.headers)[fmt.PRODUCER_GROUP] == b"payments"
    (op,) = [
        r for r in read_all(servers, settings["kafka.op_topic"]) if r.key == transaction_id.encode()
    ]
    assert dict(op.headers)[fmt.OP] == b"COMMIT"
