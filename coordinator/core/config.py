"""Configuration of contract 4: one TOML file, then environment, then command line.

Precedence, lowest first: built-in defaults (RocketMQ's BrokerConfig), the TOML file,
`TXCOORD_*` environment variables, `--set key=value` options. Keys are the file's keys;
a section is joined with a dot on the command line and with a double underscore in the
environment::

    transaction_timeout = "6s"     TXCOORD_TRANSACTION_TIMEOUT=6s    --set transaction_timeout=6s
    [kafka]
    bootstrap_servers = "h:9092"   TXCOORD_KAFKA__BOOTSTRAP_SERVERS  --set kafka.bootstrap_servers=

Durations are strings with a unit (`500ms`, `6s`, `30m`, `72h`, `1d`) or plain seconds;
sizes are strings with a unit (`4MiB`, `512KiB`) or plain bytes; switches are `true` or
`false` (`1`/`0`, `yes`/`no` from the environment or the command line). Unknown keys, malformed
values and impossible combinations are refused when the configuration is built, with a
message that names the key and where it came from.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from coordinator.core.certificate_subject import subject_of
from coordinator.core.errors import ConfigurationError
from coordinator.core.kafka_security import KafkaSecurity, SecuritySettings, security_problems
from coordinator.core.secret_files import private_file_problem
from coordinator.core.topics import UNAUTHENTICATED_PRINCIPAL, TopicLayout, principal_problem

ENV_PREFIX = "TXCOORD_"
#: `TXCOORD_*` variables that are not configuration keys: the jar cache of the install step
#: (coordinator/runtime/artifacts.py) and a notebook parameter (notebooks/).
ENV_NOT_CONFIGURATION = frozenset({"TXCOORD_JAR_CACHE", "TXCOORD_TOPIC"})
_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*")
_DURATION_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}
_SIZE = re.compile(r"\s*(\d+)\s*(B|KiB|MiB|GiB|KB|MB|GB)?\s*")
_SIZE_UNITS = {
    "B": 1,
    None: 1,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
}
#: Room in a REST request for the fields around a base64 body (topic, keys, properties, ...).
REST_REQUEST_ALLOWANCE = 256 * 1024
#: Kafka topic names (also the broker's own rule); ingress topics must not clash.
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
#: A Hadoop URI (`s3a://bucket/path`, `file:/tmp/w`): a scheme, then a colon.
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def absolute_location(location: str) -> str:
    """Return `location` as an absolute path when it is local; a URI (`s3a://b/p`) as is.

    An empty string stays empty (the configuration refuses it where a path is required).
    """
    if not location or _URI.match(location):
        return location
    return os.path.abspath(os.path.expanduser(location))


def parse_duration(value: Any, key: str = "duration") -> timedelta:
    """Return `value` ("6s", "500ms", 30, ...) as a timedelta, or raise ConfigurationError."""
    if isinstance(value, bool):
        raise ConfigurationError(f"{key}: expected a duration such as '6s', not {value!r}")
    if isinstance(value, int | float):
        return timedelta(seconds=value)
    match = _DURATION.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ConfigurationError(
            f"{key}: expected a duration such as '500ms', '6s', '30m', '72h' or '1d', not {value!r}"
        )
    return timedelta(seconds=float(match.group(1)) * _DURATION_UNITS[match.group(2)])


def parse_size(value: Any, key: str = "size") -> int:
    """Return `value` ("4MiB", 1024, ...) in bytes, or raise ConfigurationError."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _SIZE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ConfigurationError(f"{key}: expected a size such as '4MiB' or 1024, not {value!r}")
    return int(match.group(1)) * _SIZE_UNITS[match.group(2)]


@dataclass(frozen=True)
class KafkaConfig(SecuritySettings):
    """Where the ingress and check topics live, and how every Kafka client connects: the
    security keys (security_protocol, sasl_*, ssl_*) are SecuritySettings' fields
    (coordinator/core/kafka_security.py), never a secret, only where it is."""

    bootstrap_servers: str = "127.0.0.1:9092"
    half_topic: str = "txcoord.half"
    op_topic: str = "txcoord.op"
    check_topic: str = "txcoord.check"
    # Topics of their own per producer group and per operator principal, so that a secured
    # broker's ACLs keep groups apart (coordinator/core/topics.py); `txcoord up --auth-file`
    # sets it.
    topics_per_group: bool = False
    # With authenticated clients (SASL, or a TLS client certificate) on the shared topics,
    # any principal that may write the op topic acts for every group: refused at start
    # unless this says the deployment accepts that (`group_isolation_problem`).
    accept_no_group_isolation: bool = False
    operator_topic: str = "txcoord.operator"
    # Consumers (contract 5.5): the engine's delivery notices (coordinator/protocol/
    # deliveries.py), and the consumer groups' committed offsets (a compacted topic; with
    # topics_per_group the prefix of each consumer group's own, `<this>.<consumer group>`).
    deliveries_topic: str = "txcoord.deliveries"
    consumer_offsets_topic: str = "txcoord.consumer-offsets"
    partitions: int = 4
    # Topic creation on a real cluster (contract 7.7: acks=all then means this many copies).
    replication_factor: int = 1
    min_insync_replicas: int = 1
    # The principal the broker gives this configuration's clients, when it is not the SASL
    # user nor a client certificate's whole subject: with mutual TLS, what the broker's
    # ssl.principal.mapping.rules make of the subject (its operator topic and ACLs follow).
    client_principal: str = ""

    @property
    def security(self) -> KafkaSecurity:
        """Return the security settings every Kafka client of the product connects with."""
        return KafkaSecurity.of(self)

    @property
    def principal(self) -> str:
        """Return the Kafka principal name this configuration's clients act as (its operator
        topic and ACLs: coordinator/core/topics.py): `client_principal` if set, else the SASL
        user, else a TLS client certificate's subject (Kafka's default for mutual TLS,
        coordinator/core/certificate_subject.py), else Kafka's unauthenticated one."""
        if self.client_principal:
            return self.client_principal
        if self.sasl_username:
            return self.sasl_username
        if self.ssl_certfile and self.security_protocol == "SSL":
            return subject_of(self.ssl_certfile)
        return UNAUTHENTICATED_PRINCIPAL

    @property
    def principal_source(self) -> str:
        """Return the setting `principal` comes from, for error messages."""
        if self.client_principal:
            return "kafka.client_principal"
        if self.sasl_username:
            return "kafka.sasl_username"
        if self.ssl_certfile and self.security_protocol == "SSL":
            return (
                "the subject of kafka.ssl_certfile (Kafka's principal for mutual TLS; set "
                "kafka.client_principal to what the broker's ssl.principal.mapping.rules "
                "make of it)"
            )
        return "Kafka's unauthenticated principal"

    @property
    def layout(self) -> TopicLayout:
        """Return which topic carries what (coordinator/core/topics.py)."""
        return TopicLayout(
            half=self.half_topic,
            op=self.op_topic,
            check=self.check_topic,
            operator=self.operator_topic,
            per_group=self.topics_per_group,
            offsets=self.consumer_offsets_topic,
            deliveries=self.deliveries_topic,
        )


@dataclass(frozen=True)
class StreamsConfig:
    """How the decision query runs."""

    checkpoint_dir: str = "var/checkpoints"
    trigger_interval: timedelta = timedelta(seconds=1)
    # Heartbeats keep event time moving when no producer writes (contract 7.4).
    tick_interval: timedelta = timedelta(seconds=1)
    # That often while a check, discard or orphan may come due; otherwise this often
    # (streams/kafka_io/tick_pace.py): only forgetting and expiry wait for it, and an idle stack
    # rests.
    idle_tick_interval: timedelta = timedelta(seconds=15)
    # How long a resolved transaction is remembered to classify later ops as duplicates or
    # conflicts, counted in store time from its decision (a timer); afterwards such an op is
    # recorded as an orphan (still deciding nothing).
    resolved_retention: timedelta = timedelta(minutes=30)
    # How far a record's store time (the broker's LogAppendTime) may trail the newest store
    # time the coordinator has seen in another partition: its watermark trails by this much.
    # Every check and discard waits this long past its due time. Less than a
    # trigger interval less the ticker's lead (streams/kafka_io/ticker.py), so the heartbeat that
    # proves "seen up to due + skew" is read by the batch right after that moment; at a
    # whole interval (1 s) every later check waited one more batch. A single broker's store
    # times trail by milliseconds; raise it for brokers whose clocks or replication lag more.
    store_time_skew: timedelta = timedelta(seconds=0.75)
    # How often the engine compacts the small files its batches leave in the output tables,
    # off the batch path (streams/writes/compactor.py); 0 turns it off (`txcoord maintain` compacts
    # then).
    compact_interval: timedelta = timedelta(minutes=1)
    # How long each table keeps the commit files of its Delta log (`delta.logRetentionDuration`):
    # time travel and a downstream reader that falls behind can reach back this far. The
    # streams commit to a table about once a second, and every append lists its log folder,
    # so every file kept slows every append (what an hour and a week cost: docs/performance.md,
    # bench/delta_log_growth.py). Set on new tables, and on existing ones at each engine start.
    log_retention: timedelta = timedelta(hours=1)


@dataclass(frozen=True)
class SparkConfig:
    """Spark settings of the coordinator application."""

    master: str = "local[2]"
    shuffle_partitions: int = 2
    driver_memory: str = "4g"


@dataclass(frozen=True)
class RestConfig:
    """The REST ingress (contract 5.1): where it listens, who may call it, how much it accepts."""

    # Loopback by default: with no auth file every caller may act for any group.
    host: str = "127.0.0.1"
    port: int = 8080
    # TOML file of tokens ([[token]] group = ..., sha256 = ...); empty means open mode.
    auth_file: str = ""
    # Largest HTTP request body; a base64 body of max_message_size must fit (4/3 of it).
    max_request_size: int = 16 * 1024 * 1024
    # Longest wait_seconds a check-request long poll may ask for.
    check_poll_max_wait: timedelta = timedelta(seconds=30)
    # How long a check waits for a poll of the producer instance that sent its half before
    # any poller of the group gets it (contract 5.3); 0 hands every check to any poller.
    check_sender_first: timedelta = timedelta(seconds=2)
    # Largest JSON answer of a receive or a check poll: JSON spends up to six bytes on one
    # byte of a body (`\u0000`), so answers are bounded in bytes, not only in count. One
    # message or check alone may pass it (it would be stuck otherwise).
    max_answer_size: int = 8 * 1024 * 1024
    # Check requests a producer group's mailbox holds at most (collected from the check
    # topic, waiting for a poll), in bytes of their JSON; the rest stays in Kafka.
    check_mailbox_size: int = 8 * 1024 * 1024
    # What one REST consumer member may hold unacknowledged (each is kept for its
    # redelivery): messages, and bytes of their bodies, keys, tags and properties. A receive
    # past either is 429 until acknowledgements free room.
    max_unacked_messages: int = 1000
    max_unacked_size: int = 16 * 1024 * 1024
    # Lookups, acks and changes of invisible duration one token may have in flight at once
    # (an admin token: per group it names); one more is 429 at once. The reads share one
    # pool of threads: without a cap, one token's slow lookups took every thread (issue 61).
    max_reads_per_token: int = 8
    # Sends (halves, ops and their batches) one token may have in flight at once; one more is
    # 429 at once. The sends share one pool of threads: without a cap, one token's flood of
    # sends queued every other group's behind it. An admin token and open mode are not capped.
    max_sends_per_token: int = 16
    # /metrics names every consumer group and topic: with this, it needs a token with the
    # `metrics` right (or an admin's) of the auth file (coordinator/rest/auth.py).
    metrics_token_required: bool = False
    # Series of one lag family of /metrics at most: its labels are names clients choose (the
    # offsets topic holds whatever was written there); the rest are summed under "(other)".
    metrics_max_series: int = 1000
    # TLS of the ingress itself (PEM files; the key unencrypted and readable by its owner
    # only). Beyond loopback the ingress serves TLS, or says it sits behind a proxy that does:
    # bearer tokens must not cross a network in clear (coordinator/rest/auth.py).
    tls_certfile: str = ""
    tls_keyfile: str = ""
    behind_tls_proxy: bool = False


@dataclass(frozen=True)
class GrpcConfig:
    """The RocketMQ 5 gRPC endpoint (docs/rocketmq.md): RocketMQ's own clients, unchanged.

    It takes the REST ingress's auth file (`rest.auth_file`) and, as the REST ingress, runs in
    open mode on loopback only.
    """

    # On by default: `txcoord up` serves RocketMQ clients beside the REST ingress.
    enabled: bool = True
    host: str = "127.0.0.1"
    # 0 picks a free port (printed at start).
    port: int = 8081
    # How long a check waits for the Telemetry stream of the client that sent the half
    # before any live producer of the group gets it (RocketMQ: the sender first).
    check_sender_first: timedelta = timedelta(seconds=2)
    # TLS of the endpoint (PEM files; the key unencrypted and readable by its owner only).
    # Beyond loopback the endpoint serves TLS: signed calls must not cross a network in clear.
    tls_certfile: str = ""
    tls_keyfile: str = ""


@dataclass(frozen=True)
class MetricsConfig:
    """The coordinator driver's Prometheus endpoint (http://host:port/metrics)."""

    host: str = "127.0.0.1"
    # 0 picks a free port (logged at start); -1 turns the endpoint off.
    port: int = 9405


@dataclass(frozen=True)
class Config:
    """Everything the coordinator needs, validated when built; see the module docstring."""

    transaction_timeout: timedelta = timedelta(seconds=6)
    transaction_check_interval: timedelta = timedelta(seconds=30)
    transaction_check_max: int = 15
    # Largest per-message check_immunity_seconds (RocketMQ proxy's maxTransactionRecoverySecond):
    # a larger one is refused (4xx at the REST ingress, quarantine on the Kafka path).
    max_check_immunity: timedelta = timedelta(hours=1)
    file_reserved_time: timedelta = timedelta(hours=72)
    max_message_size: int = 4 * 1024 * 1024
    default_queue_count: int = 4
    # RocketMQ's autoCreateTopicEnable: a half may name a topic nobody created (its table is
    # made by its first delivery). Off in production: only `topics` may be sent to, any other
    # is refused (4xx at the REST ingress, quarantine on the Kafka path).
    auto_create_topic_enable: bool = True
    # The topics halves may name when auto_create_topic_enable is off.
    topics: tuple[str, ...] = ()
    # With auto_create_topic_enable, how many topics the warehouse holds at most, and how
    # many one producer group may bring in: each is a table that every start fences, a
    # metric label and a tally entry. A half naming a new topic past either is refused (403
    # topic_limit at the REST ingress, quarantined on the Kafka path: docs/security.md).
    max_topics: int = 1000
    max_topics_per_group: int = 100
    warehouse: str = "warehouse"
    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    streams: StreamsConfig = field(default_factory=StreamsConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    rest: RestConfig = field(default_factory=RestConfig)
    grpc: GrpcConfig = field(default_factory=GrpcConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)

    @property
    def allowed_topics(self) -> tuple[str, ...] | None:
        """Return the topics a half may name, or None when any may (auto-created)."""
        return None if self.auto_create_topic_enable else self.topics

    def __post_init__(self) -> None:
        # A relative local path means relative to the working directory at start (contract 4):
        # Delta refuses a relative table location, and a later chdir must not move the data.
        object.__setattr__(self, "warehouse", absolute_location(self.warehouse))
        streams = replace(
            self.streams, checkpoint_dir=absolute_location(self.streams.checkpoint_dir)
        )
        object.__setattr__(self, "streams", streams)
        if self.rest.auth_file:
            rest = replace(self.rest, auth_file=absolute_location(self.rest.auth_file))
            object.__setattr__(self, "rest", rest)
        problems = list(_problems(self))
        if problems:
            raise ConfigurationError("invalid configuration:\n  - " + "\n  - ".join(problems))


def _problems(c: Config) -> list[str]:
    """Return every impossible value or combination, each as one sentence."""
    found = []
    positive = {
        "transaction_timeout": c.transaction_timeout,
        "transaction_check_interval": c.transaction_check_interval,
        "file_reserved_time": c.file_reserved_time,
        "max_check_immunity": c.max_check_immunity,
        "streams.trigger_interval": c.streams.trigger_interval,
        "streams.tick_interval": c.streams.tick_interval,
        "streams.idle_tick_interval": c.streams.idle_tick_interval,
        "streams.resolved_retention": c.streams.resolved_retention,
    }
    found += [f"{k} must be positive, not {v}" for k, v in positive.items() if v <= timedelta(0)]
    if not 1 <= c.transaction_check_max <= 10_000:
        found.append(f"transaction_check_max must be 1..10000, not {c.transaction_check_max}")
    if not 1 <= c.max_message_size <= 64 * 1024**2:
        found.append(f"max_message_size must be 1 B..64 MiB, not {c.max_message_size}")
    if not c.auto_create_topic_enable and not c.topics:
        found.append(
            "auto_create_topic_enable = false needs topics: the topics halves may name "
            '(topics = ["OrderPaid", ...]); with none, every half would be refused'
        )
    found += _topic_limit_problems(c)
    if not 1 <= c.default_queue_count <= 1024:
        found.append(f"default_queue_count must be 1..1024, not {c.default_queue_count}")
    if (compact := c.streams.compact_interval) < timedelta(0):
        found.append(f"streams.compact_interval must be 0 or more, not {compact}")
    if c.streams.log_retention < timedelta(minutes=1):
        found.append(f"streams.log_retention must be 1m or more, not {c.streams.log_retention}")
    if not timedelta(0) <= c.streams.store_time_skew <= timedelta(minutes=10):
        found.append(f"streams.store_time_skew must be 0..10m, not {c.streams.store_time_skew}")
    if not 1 <= c.kafka.partitions <= 1024:
        found.append(f"kafka.partitions must be 1..1024, not {c.kafka.partitions}")
    if not 1 <= c.kafka.min_insync_replicas <= c.kafka.replication_factor <= 32:
        found.append(
            f"kafka.min_insync_replicas ({c.kafka.min_insync_replicas}) must be 1.."
            f"kafka.replication_factor ({c.kafka.replication_factor}) (at most 32)"
        )
    found += security_problems(c.kafka.security, os.environ)
    if (isolation := group_isolation_problem(c.kafka)) and not c.kafka.accept_no_group_isolation:
        found.append(
            f"{isolation}. Set kafka.topics_per_group = true (each group's topics of its "
            f"own, kept apart by the broker's ACLs: docs/security.md), or "
            f"kafka.accept_no_group_isolation = true to run so knowingly"
        )
    if not 1 <= c.spark.shuffle_partitions <= 10_000:
        found.append(f"spark.shuffle_partitions must be 1..10000, not {c.spark.shuffle_partitions}")
    if not c.warehouse:
        found.append("warehouse must not be empty")
    found += _rest_problems(c) + _grpc_problems(c)
    if not -1 <= c.metrics.port <= 65535:
        found.append(
            f"metrics.port must be -1 (off), 0 (any free port) or 1..65535, not {c.metrics.port}"
        )
    topics = {
        "half_topic": c.kafka.half_topic,
        "op_topic": c.kafka.op_topic,
        "check_topic": c.kafka.check_topic,
        "operator_topic": c.kafka.operator_topic,
        "deliveries_topic": c.kafka.deliveries_topic,
        "consumer_offsets_topic": c.kafka.consumer_offsets_topic,
    }
    found += [
        f"kafka.{k} {v!r} is not a valid Kafka topic name"
        for k, v in topics.items()
        if not _TOPIC.fullmatch(v)
    ]
    if len(set(topics.values())) < len(topics):
        found.append(
            "kafka.half_topic, kafka.op_topic, kafka.check_topic, kafka.operator_topic, "
            "kafka.deliveries_topic and kafka.consumer_offsets_topic must differ"
        )
    if c.kafka.topics_per_group and any(
        a != b and b.startswith(a + ".") for a in topics.values() for b in topics.values()
    ):
        found.append(
            "with kafka.topics_per_group, no topic name may start with another's name and a "
            f"dot (the groups' topics would mix): {sorted(topics.values())}"
        )
    found += _principal_problems(c.kafka)
    if c.file_reserved_time <= c.transaction_timeout:
        found.append(
            f"file_reserved_time ({c.file_reserved_time}) must exceed transaction_timeout "
            f"({c.transaction_timeout}): every half would expire before its first check"
        )
    if c.max_check_immunity > c.file_reserved_time:
        found.append(
            f"max_check_immunity ({c.max_check_immunity}) must not exceed file_reserved_time "
            f"({c.file_reserved_time}): such a half would expire before its first check"
        )
    if c.streams.tick_interval * 2 > c.transaction_timeout:
        found.append(
            f"streams.tick_interval ({c.streams.tick_interval}) must be at most half of "
            f"transaction_timeout ({c.transaction_timeout}) for checks to be on time"
        )
    if c.streams.idle_tick_interval < c.streams.tick_interval:
        found.append(
            f"streams.idle_tick_interval ({c.streams.idle_tick_interval}) must be at least "
            f"streams.tick_interval ({c.streams.tick_interval})"
        )
    if c.streams.trigger_interval * 2 > c.transaction_timeout:
        found.append(
            f"streams.trigger_interval ({c.streams.trigger_interval}) must be at most half of "
            f"transaction_timeout ({c.transaction_timeout}) for checks to be on time"
        )
    return found


def _topic_limit_problems(c: Config) -> list[str]:
    """Return the impossible values of max_topics and max_topics_per_group."""
    found = []
    if not 1 <= c.max_topics <= 1_000_000:
        found.append(f"max_topics must be 1..1000000, not {c.max_topics}")
    if not 1 <= c.max_topics_per_group <= c.max_topics:
        found.append(
            f"max_topics_per_group must be 1..max_topics ({c.max_topics}), "
            f"not {c.max_topics_per_group}"
        )
    return found


def _principal_problems(kafka: KafkaConfig) -> list[str]:
    """Return why the engine's principal cannot name its operator topic, if it cannot."""
    try:
        principal = kafka.principal
    except ConfigurationError:  # a certificate file missing or unreadable: said already
        return []
    if kafka.topics_per_group and (problem := principal_problem(principal)):
        return [
            f"{kafka.principal_source} names this principal's operator topic with "
            f"kafka.topics_per_group (the REST ingress sends admin ops there): {problem}"
        ]
    return []


def group_isolation_problem(kafka: KafkaConfig) -> str | None:
    """Return how a secured cluster's shared topics fail to keep groups apart, or None.

    On the shared topics the ingest takes a record's group from its header, so a cluster
    that authenticates its clients still lets any principal allowed to write the op topic
    commit or roll back any group's transactions. With `accept_no_group_isolation` the
    engine and the REST ingress start anyway, and say this at start.
    """
    security = kafka.security
    if kafka.topics_per_group or not (security.sasl or security.ssl_certfile):
        return None
    return (
        f"with authenticated Kafka clients ({security.security_protocol}) on the shared "
        f"topics (kafka.topics_per_group = false) groups are not kept apart: any principal "
        f"that may write {kafka.op_topic} commits or rolls back every group's transactions"
    )


def _rest_problems(c: Config) -> list[str]:
    """Return the impossible values of the [rest] section."""
    found = []
    rest = c.rest
    if not rest.host.strip():
        found.append("rest.host must not be empty")
    if not 1 <= rest.port <= 65535:
        found.append(f"rest.port must be 1..65535, not {rest.port}")
    # A JSON request carries the body as base64 (4 bytes per 3) plus the other fields.
    needed = -(-c.max_message_size // 3) * 4 + REST_REQUEST_ALLOWANCE
    if rest.max_request_size < needed:
        found.append(
            f"rest.max_request_size ({rest.max_request_size} bytes) must be at least {needed} "
            f"bytes: a base64 body of max_message_size ({c.max_message_size} bytes) must fit"
        )
    if rest.max_request_size > 1024**3:
        found.append(f"rest.max_request_size must be at most 1 GiB, not {rest.max_request_size}")
    if bool(rest.tls_certfile) != bool(rest.tls_keyfile):
        found.append("rest.tls_certfile and rest.tls_keyfile go together")
    for name in ("tls_certfile", "tls_keyfile"):
        path = getattr(rest, name)
        if path and not Path(path).is_file():
            found.append(f"rest.{name} {path!r} is not a readable file")
        elif (
            path
            and name == "tls_keyfile"
            and (problem := private_file_problem(Path(path), "rest.tls_keyfile"))
        ):
            found.append(problem)
    if rest.tls_certfile and rest.behind_tls_proxy:
        found.append(
            "rest.behind_tls_proxy says a proxy serves TLS; rest.tls_certfile says "
            "the ingress does: set one of them"
        )
    if not timedelta(0) <= rest.check_sender_first <= timedelta(minutes=1):
        found.append(
            f"rest.check_sender_first must be between 0 and 1m, not {rest.check_sender_first}"
        )
    for name in ("max_answer_size", "check_mailbox_size", "max_unacked_size"):
        size = getattr(rest, name)
        if not 64 * 1024 <= size <= 1024**3:
            found.append(f"rest.{name} must be between 64KiB and 1GiB, not {size} bytes")
    if not 1 <= rest.metrics_max_series <= 100_000:
        found.append(f"rest.metrics_max_series must be 1..100000, not {rest.metrics_max_series}")
    if not 1 <= rest.max_reads_per_token <= 1000:
        found.append(f"rest.max_reads_per_token must be 1..1000, not {rest.max_reads_per_token}")
    if not 1 <= rest.max_sends_per_token <= 1000:
        found.append(f"rest.max_sends_per_token must be 1..1000, not {rest.max_sends_per_token}")
    if not 1 <= rest.max_unacked_messages <= 100_000:
        found.append(
            f"rest.max_unacked_messages must be 1..100000, not {rest.max_unacked_messages}"
        )
    if not timedelta(0) < rest.check_poll_max_wait <= timedelta(minutes=5):
        found.append(
            f"rest.check_poll_max_wait must be positive and at most 5m, "
            f"not {rest.check_poll_max_wait}"
        )
    return found


def _grpc_problems(c: Config) -> list[str]:
    """Return the impossible values of the [grpc] section."""
    found = []
    if not c.grpc.host.strip():
        found.append("grpc.host must not be empty")
    if not 0 <= c.grpc.port <= 65535:
        found.append(f"grpc.port must be 0..65535 (0: any free port), not {c.grpc.port}")
    if c.grpc.enabled and (c.grpc.host, c.grpc.port) == (c.rest.host, c.rest.port):
        found.append(f"grpc.port and rest.port are both {c.grpc.port} on {c.grpc.host}")
    if not timedelta(0) <= c.grpc.check_sender_first <= timedelta(minutes=1):
        found.append(
            f"grpc.check_sender_first must be between 0 and 1m, not {c.grpc.check_sender_first}"
        )
    if bool(c.grpc.tls_certfile) != bool(c.grpc.tls_keyfile):
        found.append("grpc.tls_certfile and grpc.tls_keyfile go together")
    for name in ("tls_certfile", "tls_keyfile"):
        path = getattr(c.grpc, name)
        if path and not Path(path).is_file():
            found.append(f"grpc.{name} {path!r} is not a readable file")
        elif path and name == "tls_keyfile":
            found += filter(None, [private_file_problem(Path(path), "grpc.tls_keyfile")])
    return found


_SECTIONS: dict[str, type] = {
    "kafka": KafkaConfig,
    "streams": StreamsConfig,
    "spark": SparkConfig,
    "rest": RestConfig,
    "grpc": GrpcConfig,
    "metrics": MetricsConfig,
}
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
#: Keys whose values are sizes ("4MiB") rather than plain integers.
_SIZE_KEYS = frozenset(
    {
        "max_message_size",
        "rest.max_request_size",
        "rest.max_answer_size",
        "rest.check_mailbox_size",
        "rest.max_unacked_size",
    }
)


def _convert(cls: type, key: str, value: Any, where: str) -> Any:
    """Convert one raw value to the type of field `key` of `cls`."""
    kind = {f.name: f.type for f in fields(cls)}[key]
    name = key if cls is Config else f"{_section_of(cls)}.{key}"
    label = f"{name} (from {where})"
    if kind == "timedelta":
        return parse_duration(value, label)
    if name in _SIZE_KEYS:
        return parse_size(value, label)
    if kind == "int":
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigurationError(f"{label}: expected an integer, not {value!r}")
    if kind == "str":
        if isinstance(value, str):
            return value
        raise ConfigurationError(f"{label}: expected a string, not {value!r}")
    if kind == "tuple[str, ...]":
        # A TOML array of strings, or (environment, --set) one string of comma-separated names.
        items = value.split(",") if isinstance(value, str) else value
        if isinstance(items, list | tuple) and all(isinstance(item, str) for item in items):
            return tuple(item.strip() for item in items if item.strip())
        raise ConfigurationError(f"{label}: expected a list of strings, not {value!r}")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _BOOLEANS:
            return _BOOLEANS[value.strip().lower()]
        raise ConfigurationError(f"{label}: expected true or false, not {value!r}")
    raise AssertionError(f"unhandled field type {kind} of {name}")


def _section_of(cls: type) -> str:
    return next(name for name, section in _SECTIONS.items() if section is cls)


def _unknown(key: str, known: list[str], where: str) -> ConfigurationError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(known)}"
    return ConfigurationError(f"unknown configuration key {key!r} (from {where}){hint}")


def _flatten(raw: Mapping[str, Any], where: str) -> dict[str, tuple[Any, str]]:
    """Return {"key" or "section.key": (value, where)} from a nested TOML document."""
    flat: dict[str, tuple[Any, str]] = {}
    for key, value in raw.items():
        if isinstance(value, Mapping):
            for sub, sub_value in value.items():
                flat[f"{key}.{sub}"] = (sub_value, where)
        else:
            flat[key] = (value, where)
    return flat


def _known_keys() -> list[str]:
    top = [f.name for f in fields(Config) if f.name not in _SECTIONS]
    nested = [f"{s}.{f.name}" for s, cls in _SECTIONS.items() for f in fields(cls)]
    return top + nested


def load_config(
    path: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, str] | None = None,
) -> Config:
    """Build the configuration from the file, the environment and `--set` overrides."""
    flat: dict[str, tuple[Any, str]] = {}
    if path is not None:
        try:
            raw = tomllib.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigurationError(f"configuration file {path} does not exist") from None
        except tomllib.TOMLDecodeError as exc:
            message = f"configuration file {path} is not valid TOML: {exc}"
            raise ConfigurationError(message) from None
        flat.update(_flatten(raw, str(path)))
    for name, value in (environ or {}).items():
        if name.startswith(ENV_PREFIX) and name not in ENV_NOT_CONFIGURATION:
            key = name[len(ENV_PREFIX) :].lower().replace("__", ".")
            flat[key] = (value, f"${name}")
    for key, value in (overrides or {}).items():
        flat[key] = (value, "--set")

    known = _known_keys()
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {name: {} for name in _SECTIONS}
    for key, (value, where) in flat.items():
        if key not in known:
            raise _unknown(key, known, where)
        section, _, sub = key.rpartition(".")
        if section:
            sections[section][sub] = _convert(_SECTIONS[section], sub, value, where)
        else:
            top[key] = _convert(Config, key, value, where)
    built = {name: replace(cls(), **sections[name]) for name, cls in _SECTIONS.items()}
    return Config(**top, **built)


def parse_overrides(pairs: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Return {"key": "value"} from `--set key=value` options."""
    result = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigurationError(f"--set expects key=value, not {pair!r}")
        result[key.strip()] = value.strip()
    return result
