"""Build the RocketMQ 5 gRPC endpoint and run it: beside the REST ingress under `txcoord up`,
or on its own (`python -m coordinator.rocketmq`).

`Endpoint(config)` wires the real parts: the auth file's credentials, the REST ingress's
Kafka writer (one idempotent acks=all producer), a check poller of its own (Kafka consumer
groups `txcoord-grpc-<group>`, so the REST ingress's pollers and this endpoint each see every
check) and the live Telemetry streams. Nothing connects before the first call.
"""

from __future__ import annotations

import logging
import threading
from concurrent import futures
from pathlib import Path

import grpc
from rocketmq.grpc_protocol import service_pb2 as service
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc

from coordinator.core.config import Config
from coordinator.core.errors import ConfigurationError
from coordinator.rest.app import check_poller, ingress_writer
from coordinator.rest.auth import Authenticator
from coordinator.rest.consumers import ConsumerMembers
from coordinator.rest.services import Lookup, Poller, Services, Writer
from coordinator.rocketmq.credentials import CLIENT_ID, Credentials, require_safe_listen
from coordinator.rocketmq.service import MessagingService
from coordinator.rocketmq.telemetry import LiveStreams
from delta_tables.lookup import DeltaRows, TransactionLookup

__all__ = ["Endpoint", "consumer_group_of"]

log = logging.getLogger("txcoord.rocketmq")

#: Telemetry streams open at once, at most: each holds a thread while open.
MAX_STREAMS = 64
#: Threads for the unary calls beside every open stream and long poll.
SPARE_WORKERS = 32
#: Room for a message's properties and the call's framing on top of max_message_size: a body
#: just over the limit still reaches the endpoint, which answers MESSAGE_BODY_TOO_LARGE.
FRAME_ALLOWANCE_BYTES = 1024 * 1024
#: How long the start's own Heartbeat may take.
PROBE_TIMEOUT_SECONDS = 10.0


def consumer_group_of(producer_group: str) -> str:
    """Return the Kafka consumer group that reads `producer_group`'s checks for this endpoint."""
    return f"txcoord-grpc-{producer_group}"


class Endpoint:
    """The gRPC server of one configuration: `start`, `address`, `stop`."""

    def __init__(
        self,
        config: Config,
        *,
        credentials: Credentials | None = None,
        writer: Writer | None = None,
        poller: Poller | None = None,
        lookup: Lookup | None = None,
    ) -> None:
        self.config = config
        self.credentials = credentials if credentials is not None else Credentials.of(config)
        require_safe_listen(self.credentials, config)
        self.services = Services(
            config=config,
            # The REST service layer's own checks see an admin: who may act is decided here.
            auth=Authenticator(None),
            writer=writer or ingress_writer(config, client_id="txcoord-rocketmq"),
            lookup=lookup or TransactionLookup(DeltaRows(config.warehouse)),
            poller=poller
            or check_poller(config, config.grpc.check_sender_first, consumer_group_of),
            consumers=ConsumerMembers(config),
        )
        self.streams = LiveStreams(self.services.poller, max_streams=MAX_STREAMS)
        self._server: grpc.Server | None = None
        self.port = 0
        self._stopped = threading.Event()

    @property
    def address(self) -> str:
        """Return `host:port` of the endpoint (the port it bound, once started)."""
        return f"{self.config.grpc.host}:{self.port}"

    def start(self) -> Endpoint:
        """Listen on grpc.host:grpc.port (0: any free port); return self."""
        size = self.config.max_message_size + FRAME_ALLOWANCE_BYTES
        server = grpc.server(
            # Each Telemetry stream and each waiting receive holds a thread: room for all of
            # them (their caps: MAX_STREAMS, the long-poll slots) and for the sends beside.
            futures.ThreadPoolExecutor(
                max_workers=MAX_STREAMS + self.services.poll_slots.total + SPARE_WORKERS,
                thread_name_prefix="rocketmq",
            ),
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", size),
                ("grpc.so_reuseport", 0),
            ],
        )
        service_grpc.add_MessagingServiceServicer_to_server(
            MessagingService(self.services, self.credentials, self.streams), server
        )
        host = self.config.grpc.host
        listen = f"[{host}]" if ":" in host else host
        address = f"{listen}:{self.config.grpc.port}"
        tls = self.config.grpc
        try:
            if tls.tls_certfile:
                key = Path(tls.tls_keyfile).read_bytes()
                chain = Path(tls.tls_certfile).read_bytes()
                credentials = grpc.ssl_server_credentials([(key, chain)])
                self.port = server.add_secure_port(address, credentials)
            else:
                self.port = server.add_insecure_port(address)
        except RuntimeError as exc:  # grpcio raises; older versions returned 0
            self.port, problem = 0, str(exc)
        else:
            problem = "the address is taken"
        if not self.port:
            raise ConfigurationError(
                f"the RocketMQ gRPC endpoint cannot listen on {host}:{self.config.grpc.port}: "
                f"{problem} (set grpc.port, or grpc.enabled = false)"
            )
        server.start()
        self._server = server
        if not tls.tls_certfile:  # over TLS the name a probe would check is the operator's
            self._probe()
        if self.credentials.open_mode:
            log.warning(
                "RocketMQ gRPC endpoint in open mode (rest.auth_file is empty): every caller "
                "may act for every producer group; it listens on loopback (%s) only",
                host,
            )
        log.info("RocketMQ gRPC endpoint on %s", self.address)
        return self

    def _probe(self) -> None:
        """Prove the endpoint answers: one Heartbeat over loopback (a real round trip; behind
        an auth file the answer is UNAUTHORIZED, an answer all the same)."""
        host = self.config.grpc.host
        target = f"[{host}]:{self.port}" if ":" in host else f"{host}:{self.port}"
        with grpc.insecure_channel(target) as channel:
            stub = service_grpc.MessagingServiceStub(channel)
            try:
                stub.Heartbeat(
                    service.HeartbeatRequest(),
                    metadata=[(CLIENT_ID, "txcoord-probe")],
                    timeout=PROBE_TIMEOUT_SECONDS,
                )
            except grpc.RpcError as exc:
                self.stop(grace=0)
                raise ConfigurationError(
                    f"the RocketMQ gRPC endpoint on {self.address} does not answer: {exc}"
                ) from exc

    def wait(self) -> None:
        """Block until `stop`."""
        self._stopped.wait()

    def stop(self, grace: float = 3.0) -> None:
        """Stop listening, end every stream, close the Kafka clients."""
        self.streams.close_all()
        if self._server is not None:
            self._server.stop(grace).wait(grace + 2)
        self.services.poller.close()
        self.services.writer.close()
        self.services.consumers.close()
        self._stopped.set()
