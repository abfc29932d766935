"""Build the REST ingress app and run it with uvicorn.

`create_app(config)` wires the real parts (token file, Kafka producer, check-topic consumers,
Delta reader, the REST consumers' members); tests pass their own. Nothing connects at build
time: the producer and the consumers are made on first use, so the app answers 503 while
Kafka is down and recovers.
`serve(config)` also creates the ingress topics when absent (with LogAppendTime, which the
ingest requires) before it listens.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import timedelta
from importlib.metadata import PackageNotFoundError, version

import uvicorn
from fastapi import FastAPI

from coordinator.admin.consumer_groups import GroupLag
from coordinator.core.config import Config, group_isolation_problem
from coordinator.core.errors import KafkaUnavailableError, TxcoordError
from coordinator.rest.auth import Authenticator, require_safe_listen
from coordinator.rest.check_poll import CheckPoller, consumer_group_of
from coordinator.rest.consumer_routes import build_consumer_router
from coordinator.rest.consumers import ConsumerMembers
from coordinator.rest.errors import install_error_handlers
from coordinator.rest.gate import AuthGate
from coordinator.rest.host_guard import HostGuard
from coordinator.rest.kafka_writer import KafkaWriter
from coordinator.rest.limits import RequestLimits
from coordinator.rest.metrics import Metrics, MetricsMiddleware
from coordinator.rest.openapi import install_openapi
from coordinator.rest.poll_slots import PollSlots
from coordinator.rest.routes import build_router
from coordinator.rest.services import Lookup, Poller, Services, Writer, epoch_ms
from delta_tables.lookup import DeltaRows, TransactionLookup

log = logging.getLogger("txcoord.rest")


def _version() -> str:
    try:
        return version("txcoord")
    except PackageNotFoundError:
        return "0+unknown"


def create_app(
    config: Config,
    *,
    auth: Authenticator | None = None,
    writer: Writer | None = None,
    lookup: Lookup | None = None,
    poller: Poller | None = None,
    poll_slots: PollSlots | None = None,
    consumers: ConsumerMembers | None = None,
    clock: Callable[[], int] = epoch_ms,
) -> FastAPI:
    """Return the REST app of `config`; every part not given is the real one."""
    auth = auth if auth is not None else Authenticator.from_auth_file(config.rest.auth_file)
    require_safe_listen(auth, config.rest)
    if isolation := group_isolation_problem(config.kafka):  # accepted, or config refused it
        log.warning("%s (kafka.accept_no_group_isolation = true)", isolation)
    if auth.open_mode:
        log.warning(
            "REST ingress in open mode (rest.auth_file is empty): every caller may act for "
            "every producer group; it listens on loopback (%s) only",
            config.rest.host,
        )
    services = Services(
        config=config,
        auth=auth,
        writer=writer or ingress_writer(config),
        lookup=lookup or TransactionLookup(DeltaRows(config.warehouse)),
        poller=poller or check_poller(config, config.rest.check_sender_first),
        consumers=consumers or ConsumerMembers(config),
        metrics=Metrics(max_series=config.rest.metrics_max_series),
        clock=clock,
        poll_slots=poll_slots or PollSlots(),
    )
    services.metrics.watch_consumers(services.consumers.count, services.consumers.lag)
    group_lag = GroupLag(config)
    services.metrics.watch_groups(group_lag)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            group_lag.close()
            services.consumers.close()  # they store their offsets and leave their groups
            services.poller.close()
            services.writer.close()

    app = FastAPI(
        title="txcoord REST ingress",
        version=_version(),
        description="Transactional messages (RocketMQ's protocol): halves, ops, state, checks; "
        "and the committed messages' consumers (receive, ack).",
        lifespan=lifespan,
        docs_url=None,  # the UI loads scripts from a CDN; /openapi.json is the document
        redoc_url=None,
    )
    app.state.services = services
    install_error_handlers(app)
    app.include_router(build_router(config))
    app.include_router(build_consumer_router(config))
    app.add_middleware(RequestLimits, max_request_size=config.rest.max_request_size)
    app.add_middleware(  # before RequestLimits reads any body
        AuthGate, auth=auth, protect_metrics=config.rest.metrics_token_required
    )
    if auth.open_mode:  # every caller is an admin: only this machine's names (DNS rebinding)
        app.add_middleware(HostGuard, listen_host=config.rest.host)
    app.add_middleware(MetricsMiddleware, metrics=services.metrics)  # outermost: sees all
    install_openapi(app)
    return app


def ingress_writer(config: Config, client_id: str = "txcoord-rest") -> KafkaWriter:
    """Return the Kafka writer of an ingress of `config` (the REST ingress, the RocketMQ
    endpoint): one idempotent acks=all producer, made on first use, that creates a group's
    own topics before its first record."""
    return KafkaWriter(
        config.kafka.bootstrap_servers,
        config.kafka.layout,
        max_message_size=config.max_message_size,
        client_id=client_id,
        security=config.kafka.security,
        principal=config.kafka.principal,
        ensure_topic=functools.partial(ensure_topic, config),
    )


def check_poller(
    config: Config,
    sender_first: timedelta,
    consumer_group: Callable[[str], str] = consumer_group_of,
) -> CheckPoller:
    """Return the check poller of an ingress of `config`: the sender's instance gets a check
    first, for `sender_first`; `consumer_group` names the Kafka consumer group that reads a
    producer group's checks (each ingress its own, so each sees every check)."""
    return CheckPoller(
        config.kafka.bootstrap_servers,
        config.kafka.layout,
        security=config.kafka.security,
        sender_first=sender_first,
        mailbox_bytes=config.rest.check_mailbox_size,
        consumer_group=consumer_group,
    )


def ensure_topic(config: Config, topic: str) -> tuple[str, ...]:
    """Create a group's own topics, or an operator topic, before its first record (per-group
    layout); return the topics now ready."""
    # Imported here, as in `serve`: the admin API only where it is needed.
    from streams.kafka_io.ingress_topics import ensure_group_topics, ensure_operator_topic  # noqa: PLC0415

    role = config.kafka.layout.role_of(topic)
    try:
        if role is not None and role.principal is not None:
            return (ensure_operator_topic(config, role.principal),)
        if role is not None and role.group is not None:
            return ensure_group_topics(config, role.group)
        return ()
    except TxcoordError:
        raise
    except Exception as exc:
        raise KafkaUnavailableError(
            f"cannot create topic {topic!r} on {config.kafka.bootstrap_servers}: {exc}"
        ) from exc


def build_server(config: Config, app: FastAPI | None = None) -> uvicorn.Server:
    """Return a uvicorn server for `app` (default: create_app(config)) on rest.host:port."""
    settings = uvicorn.Config(
        app if app is not None else create_app(config),
        host=config.rest.host,
        port=config.rest.port,
        ssl_certfile=config.rest.tls_certfile or None,
        ssl_keyfile=config.rest.tls_keyfile or None,
        log_level="info",
        access_log=False,  # /metrics counts requests; access lines would drown the log
        server_header=False,
        # Long polls may wait rest.check_poll_max_wait: do not hold a shutdown for them.
        timeout_graceful_shutdown=3,
    )
    return uvicorn.Server(settings)


def serve(config: Config) -> None:
    """Create the ingress topics if absent, then answer requests until SIGINT or SIGTERM."""
    # Imported here: it is the only part of the REST that needs Kafka's admin API.
    from streams.kafka_io.ingress_topics import prepare_ingress_topics  # noqa: PLC0415

    app = create_app(config)  # first: a bad token file is refused before any network call
    prepare_ingress_topics(config)
    server = build_server(config, app)
    scheme = "https" if config.rest.tls_certfile else "http"
    log.info("REST ingress on %s://%s:%d", scheme, config.rest.host, config.rest.port)
    server.run()
