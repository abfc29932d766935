"""The local broker secured: SCRAM principals, Kafka's StandardAuthorizer and our ACLs.

`txcoord up --auth-file F` reads the `[kafka]` part of the auth file (the `[[token]]` part
is the REST ingress's, coordinator/rest/auth.py). Without a `[kafka]` part the broker stays
open on loopback, as before. The part names one principal per producer group, one for
operators and one for the engine itself::

    [kafka.engine]                         # the engine, REST ingress and broker: super user
    principal = "txcoord-engine"
    password_file = "secrets/engine.password"

    [kafka.operator]                       # operator commands (txcoord transactions ...)
    principal = "txcoord-operator"
    password_file = "secrets/operator.password"

    [[kafka.group]]                        # one per producer group that uses Kafka directly
    group = "orders"
    principal = "orders-app"
    password_file = "secrets/orders.password"

    [kafka.tls]                            # optional: SASL_SSL instead of SASL_PLAINTEXT
    certfile = "tls/broker.pem"            # PEM certificate chain of the broker
    keyfile = "tls/broker.key"             # its unencrypted PKCS#8 PEM key
    cafile = "tls/ca.pem"                  # the CA clients trust

A relative path is relative to the auth file. A password file holds one password (a
trailing newline is ignored) of at least 16 characters from `[A-Za-z0-9._~-]`
(`python -c "import secrets; print(secrets.token_urlsafe(24))"`): Kafka's `--add-scram`
argument syntax has no quoting.

What the broker gets (`server_properties`): one client listener on loopback with SASL
SCRAM-SHA-256 (over TLS if `[kafka.tls]`), the controller listener with SASL PLAIN for the
engine only (the broker talks to its own controller; no anonymous super user),
`authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer`, the
engine as the only super user, and no access where no ACL allows it. SCRAM credentials are
added when the storage is formatted (`kafka-storage format --add-scram`, passed through a
private java @argfile so no password is on a command line) and upserted on every start
through the admin API, so an edited auth file takes effect on restart.

ACLs (`acls`), all on literal names of the per-group topic layout (coordinator/core/topics.py),
which `txcoord up --auth-file` switches on (`[kafka] topics_per_group = true`):

- group principal: WRITE `txcoord.half.<group>` and `txcoord.op.<group>`, READ
  `txcoord.check.<group>`, READ its SDK consumer group `txcoord-sdk-<group>`; nothing on the
  shared topics or another group's;
- operator principal: WRITE its own operator topic `txcoord.operator.<principal>` (its ops
  are the only thing it sends; the coordinator records the principal as who sent them);
- engine principal: WRITE and DESCRIBE on the transactional ids of the warehouse's check and
  notice producers (coordinator/core/topics.py `engine_grants`, streams/kafka_io/kafka_fence.py).
  The engine is a super user here and needs no grant: these are what a managed cluster must grant
  it, made here too so that the local stack grants what docs/security.md lists.

`apply_auth` creates those topics first (a group principal may not create topics), so
a group of the auth file can send as soon as the stack is up.

The file names no SDK consumer group (its consumers are the REST ingress's `[[token.consume]]`
grants, whose members run as the engine), so no consumer ACL is made here: an SDK consumer
group's offsets topic and grants come from `txcoord provision --consumer-group`
(coordinator/core/topics.py `consumer_grants`).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coordinator.core.errors import ConfigurationError
from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.secret_files import private_file_problem, write_private
from coordinator.core.topics import TopicLayout, engine_grants, grants, group_topic_problem

if TYPE_CHECKING:
    from coordinator.core.config import Config

__all__ = ["BrokerAuth", "BrokerPrincipal", "BrokerTls", "acls", "load_broker_auth"]

MECHANISM = "SCRAM-SHA-256"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
_PASSWORD = re.compile(r"[A-Za-z0-9._~-]{16,256}")


@dataclass(frozen=True)
class BrokerPrincipal:
    """A SCRAM user of the local broker; the password stays in its file."""

    name: str
    password_file: Path

    def password(self) -> str:
        """Return the password, read from its file now."""
        return self.password_file.read_text(encoding="utf-8").rstrip("\r\n")

    def security(self, tls: BrokerTls | None = None) -> KafkaSecurity:
        """Return the client settings with which this principal connects to the broker."""
        return KafkaSecurity(
            security_protocol="SASL_SSL" if tls else "SASL_PLAINTEXT",
            sasl_mechanism=MECHANISM,
            sasl_username=self.name,
            sasl_password_file=str(self.password_file),
            ssl_cafile=str(tls.cafile) if tls else "",
        )

    @property
    def user(self) -> str:
        """Return the Kafka principal, as ACLs name it."""
        return f"User:{self.name}"


@dataclass(frozen=True)
class BrokerTls:
    """The broker's PEM certificate chain and key, and the CA its clients trust."""

    certfile: Path
    keyfile: Path
    cafile: Path


@dataclass(frozen=True)
class BrokerAuth:
    """Who may use the local broker; see the module docstring."""

    engine: BrokerPrincipal
    operator: BrokerPrincipal
    groups: dict[str, BrokerPrincipal]
    tls: BrokerTls | None = None

    @property
    def principals(self) -> list[BrokerPrincipal]:
        """Return every principal: engine, operator, then the groups'."""
        return [self.engine, self.operator, *self.groups.values()]

    @property
    def engine_security(self) -> KafkaSecurity:
        """Return the settings of the engine's clients (and the readiness probe's)."""
        return self.engine.security(self.tls)

    def server_properties(self, host: str, port: int, controller_port: int) -> dict[str, str]:
        """Return the broker properties that replace the open listeners (engine's secrets)."""
        engine, password = self.engine.name, self.engine.password()
        protocol = "SASL_SSL" if self.tls else "SASL_PLAINTEXT"
        properties = {
            "listeners": f"CLIENT://{host}:{port},CONTROLLER://{host}:{controller_port}",
            "advertised.listeners": f"CLIENT://{host}:{port}",
            "listener.security.protocol.map": f"CLIENT:{protocol},CONTROLLER:SASL_PLAINTEXT",
            "inter.broker.listener.name": "CLIENT",
            "sasl.enabled.mechanisms": MECHANISM,
            "sasl.mechanism.inter.broker.protocol": MECHANISM,
            "listener.name.client.scram-sha-256.sasl.jaas.config": (
                f'{_SCRAM_MODULE} required username="{engine}" password="{password}";'
            ),
            # The controller cannot use SCRAM (its credentials live in the metadata it
            # serves): PLAIN with one static user, the engine.
            "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.controller.protocol": "PLAIN",
            "listener.name.controller.plain.sasl.jaas.config": (
                f'{_PLAIN_MODULE} required username="{engine}" password="{password}" '
                f'user_{engine}="{password}";'
            ),
            "authorizer.class.name": AUTHORIZER,
            "super.users": self.engine.user,
            "allow.everyone.if.no.acl.found": "false",
        }
        if self.tls:
            properties |= {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(_combined_pem(self.tls)),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.tls.cafile),
            }
        return properties

    def scram_arguments(self) -> list[str]:
        """Return the `--add-scram` arguments of `kafka-storage format` (secrets: argfile only)."""
        return [
            f"--add-scram={MECHANISM}=[name={p.name},password={p.password()}]"
            for p in self.principals
        ]


def _combined_pem(tls: BrokerTls) -> Path:
    """Return a PEM keystore file: key then chain (Kafka's PEM keystore location format)."""
    combined = tls.keyfile.with_name(tls.keyfile.name + ".keystore.pem")
    write_private(combined, tls.keyfile.read_text() + tls.certfile.read_text())
    return combined


def acls(auth: BrokerAuth, layout: TopicLayout, warehouse: str | None = None) -> list[Any]:
    """Return the ACLs of the module docstring (coordinator/core/topics.py's `grants`, and
    with `warehouse` its `engine_grants` for that warehouse) for kafka-python.

    `layout` must be the per-group one: shared topics cannot keep groups apart. Raises
    ConfigurationError for a group whose name no topic can hold.
    """
    # Imported here: only the local stack's start needs kafka-python's admin types.
    from kafka.admin import (  # noqa: PLC0415
        ACL,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePattern,
        ResourceType,
    )

    if not layout.per_group:
        raise ConfigurationError("a secured broker needs [kafka] topics_per_group = true")
    for group in auth.groups:
        if problem := group_topic_problem(group, layout):
            raise ConfigurationError(f"auth file [[kafka.group]] {group!r}: {problem}")
    wanted = grants(layout, {g: who.name for g, who in auth.groups.items()}, (auth.operator.name,))
    if warehouse is not None:  # the engine's, for `warehouse`'s transactional producers
        wanted += engine_grants(auth.engine.name, warehouse)
    return [
        ACL(
            f"User:{g.principal}",
            "*",
            ACLOperation[g.operation],
            ACLPermissionType.ALLOW,
            ResourcePattern(ResourceType[g.resource], g.name, ACLResourcePatternType.LITERAL),
        )
        for g in wanted
    ]


def apply_auth(bootstrap_servers: str, auth: BrokerAuth, config: Config) -> list[Any]:
    """Create the topics of every group and operator, upsert every principal's SCRAM
    credential and create the ACLs; return the ACLs.

    `config` is the engine's, per-group layout (`[kafka] topics_per_group`). Runs as the
    engine.
    """
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion  # noqa: PLC0415

    from coordinator.kafka_clients.admin import admin_client  # noqa: PLC0415
    from streams.kafka_io.ingress_topics import ensure_group_topics, ensure_operator_topic  # noqa: PLC0415

    wanted = acls(auth, config.kafka.layout, config.warehouse)
    for group in sorted(auth.groups):
        ensure_group_topics(config, group)
    ensure_operator_topic(config, auth.operator.name)
    with admin_client(bootstrap_servers, "txcoord-auth", auth.engine_security) as admin:
        upserts = [
            UserScramCredentialUpsertion(p.name, ScramMechanism.SCRAM_SHA_256, p.password())
            for p in auth.principals
            if p is not auth.engine  # its credential came with the format; it is in use
        ]
        if upserts:
            admin.alter_user_scram_credentials(upserts)
        result: Any = admin.create_acls(wanted)
    if result["failed"]:
        raise ConfigurationError(f"creating the broker's ACLs failed: {result['failed']}")
    return wanted


def _principal(raw: Any, label: str, base: Path) -> BrokerPrincipal:
    if not isinstance(raw, dict):
        raise ConfigurationError(f"{label} must be a table with principal and password_file")
    unknown = sorted(set(raw) - {"principal", "password_file", "group"})
    if unknown:
        raise ConfigurationError(f"{label}: unknown keys {', '.join(unknown)}")
    name, file = raw.get("principal"), raw.get("password_file")
    if not (isinstance(name, str) and _NAME.fullmatch(name)):
        raise ConfigurationError(f"{label}: principal must match {_NAME.pattern}, not {name!r}")
    if not (isinstance(file, str) and file):
        raise ConfigurationError(f"{label}: password_file is required")
    path = (base / file).resolve()
    if problem := private_file_problem(path, f"{label}: password_file"):
        raise ConfigurationError(problem)
    try:
        password = path.read_text(encoding="utf-8").rstrip("\r\n")
    except OSError as exc:
        raise ConfigurationError(f"{label}: cannot read password_file {path}: {exc}") from None
    if not _PASSWORD.fullmatch(password):
        raise ConfigurationError(
            f"{label}: the password in {path} must be 16..256 characters of [A-Za-z0-9._~-]"
        )
    return BrokerPrincipal(name, path)


def load_broker_auth(path: Path) -> BrokerAuth | None:
    """Return the `[kafka]` part of auth file `path`, or None when it has none (open broker)."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"auth file {path}: {exc}") from None
    kafka = raw.get("kafka")
    if kafka is None:
        return None
    where, base = f"auth file {path}: [kafka]", path.resolve().parent
    unknown = sorted(set(kafka) - {"engine", "operator", "group", "tls"})
    if unknown or not isinstance(kafka.get("group", []), list):
        raise ConfigurationError(f"{where} knows engine, operator, [[kafka.group]] and tls only")
    engine = _principal(kafka.get("engine"), f"{where}.engine", base)
    operator = _principal(kafka.get("operator"), f"{where}.operator", base)
    groups: dict[str, BrokerPrincipal] = {}
    for index, entry in enumerate(kafka.get("group", [])):
        label = f"{where}.group #{index + 1}"
        group = entry.get("group") if isinstance(entry, dict) else None
        if not (isinstance(group, str) and group) or group in groups:
            raise ConfigurationError(f"{label}: group must be a new producer group name")
        groups[group] = _principal(entry, label, base)
    names = [p.name for p in (engine, operator, *groups.values())]
    if len(set(names)) < len(names):
        raise ConfigurationError(f"{where}: every principal must be a different user")
    tls = None
    if "tls" in kafka:
        files = {k: kafka["tls"].get(k) for k in ("certfile", "keyfile", "cafile")}
        if not all(isinstance(v, str) and (base / v).is_file() for v in files.values()):
            raise ConfigurationError(f"{where}.tls needs readable certfile, keyfile and cafile")
        tls = BrokerTls(**{k: (base / v).resolve() for k, v in files.items()})
    return BrokerAuth(engine, operator, groups, tls)
