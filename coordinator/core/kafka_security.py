"""How every Kafka client of the product connects: one security setting, three spellings.

contract 5.2: the Kafka path works against a secured cluster, and every Kafka client of the
product (Spark source and sink, admin client, REST ingress, SDK, ticker, check publisher,
operator commands, bench) takes the same settings. They come from `[kafka]`::

    [kafka]
    bootstrap_servers = "b-1.example:9096"
    security_protocol = "SASL_SSL"            # PLAINTEXT (default), SSL, SASL_PLAINTEXT
    sasl_mechanism = "SCRAM-SHA-512"          # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
    sasl_username = "orders-app"
    sasl_password_file = "/run/secrets/kafka" # or: sasl_password_env = "KAFKA_PASSWORD"
    ssl_cafile = "/etc/ssl/kafka-ca.pem"      # PEM trust store (empty: the system's)
    ssl_certfile = ""                         # PEM client certificate (mutual TLS) ...
    ssl_keyfile = ""                          # ... and its unencrypted PKCS#8 PEM key

The keys and their defaults are declared once, in `SecuritySettings`: `KafkaSecurity`
holds them, and `[kafka]`'s KafkaConfig (coordinator/core/config.py) inherits them.
`KafkaSecurity` turns them into (a) kafka-python keyword arguments (`client_options`), (b)
librdkafka's properties for the confluent-kafka clients (`librdkafka_options`: the REST
ingress's writer) and (c) the `kafka.`-prefixed options of Spark's Kafka source and sink
(`spark_options`). Only this module spells them, so the clients cannot drift apart. The
open default gives three empty mappings: a plaintext client is built exactly as before.

Secrets: the settings name where the password is (a file, an environment variable), never
the password itself, so a configuration, its repr and every error message are safe to log.
The password is read when options are built and travels inside a `Secret` (a str whose repr
is masked), so a logged options mapping shows `'***'`. Spark redacts option values that
contain "password" (spark.redaction.regex) and Kafka's Java client masks `sasl.jaas.config`.

Small: no Spark and no kafka-python import, so the SDK uses it as is. Its one network call
is `reachable`, a TCP connect: `AuthenticationWatch` makes it after a client failed to
connect, the REST ingress's writer before it builds a producer.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from coordinator.core.errors import ConfigurationError
from coordinator.core.secret_files import private_file_problem

__all__ = [
    "MECHANISMS",
    "PROTOCOLS",
    "AuthenticationWatch",
    "KafkaSecurity",
    "Secret",
    "SecuritySettings",
    "reachable",
    "security_problems",
]

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: JAAS login module of each SASL mechanism (Kafka's Java client, used by Spark).
_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


class Secret(str):
    """A string whose repr is masked: a password, or a value that embeds one."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "'***'"


@dataclass(frozen=True)
class SecuritySettings:
    """The `[kafka]` keys of a client's security and their defaults, declared once.

    Never a secret here, only where it is (a file, an environment variable).
    """

    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password_file: str = ""
    sasl_password_env: str = ""
    ssl_cafile: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""


@dataclass(frozen=True)
class KafkaSecurity(SecuritySettings):
    """The security settings of one Kafka client; see the module docstring.

    Holds no secret (a password file's path or a variable's name), so its repr is safe.
    """

    @classmethod
    def of(cls, settings: SecuritySettings) -> KafkaSecurity:
        """Return the security settings of `settings` (a KafkaConfig, say)."""
        return cls(**{f.name: getattr(settings, f.name) for f in fields(SecuritySettings)})

    @property
    def sasl(self) -> bool:
        """Return True if the client authenticates with SASL."""
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        """Return True if the connection is encrypted with TLS."""
        return self.security_protocol in ("SSL", "SASL_SSL")

    def validated(self, environ: Mapping[str, str] | None = None) -> KafkaSecurity:
        """Return self, or raise ConfigurationError listing every problem."""
        problems = security_problems(self, os.environ if environ is None else environ)
        if problems:
            raise ConfigurationError(
                "invalid Kafka security settings:\n  - " + "\n  - ".join(problems)
            )
        return self

    def password(self, environ: Mapping[str, str] | None = None) -> Secret:
        """Return the SASL password, read now from its file or environment variable."""
        self.validated(environ)
        if self.sasl_password_file:
            text = Path(self.sasl_password_file).read_text(encoding="utf-8")
            return Secret(text.rstrip("\r\n"))
        env = os.environ if environ is None else environ
        return Secret(env[self.sasl_password_env])

    def client_options(self, environ: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Return the kafka-python keyword arguments (empty for PLAINTEXT)."""
        self.validated(environ)
        if self.security_protocol == "PLAINTEXT":
            return {}
        options: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.sasl:
            options |= {
                "sasl_mechanism": self.sasl_mechanism,
                "sasl_plain_username": self.sasl_username,
                "sasl_plain_password": self.password(environ),
            }
        if self.tls:
            ssl = {
                "ssl_cafile": self.ssl_cafile,
                "ssl_certfile": self.ssl_certfile,
                "ssl_keyfile": self.ssl_keyfile,
            }
            options |= {key: value for key, value in ssl.items() if value}
        return options

    def librdkafka_options(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Return librdkafka's configuration properties (confluent-kafka; empty for PLAINTEXT).

        PEM files by location, as kafka-python takes them; librdkafka, like kafka-python,
        checks the broker's host name against its certificate by default.
        """
        self.validated(environ)
        if self.security_protocol == "PLAINTEXT":
            return {}
        options: dict[str, str] = {"security.protocol": self.security_protocol}
        if self.sasl:
            options |= {
                "sasl.mechanism": self.sasl_mechanism,
                "sasl.username": self.sasl_username,
                "sasl.password": self.password(environ),
            }
        if self.tls:
            ssl = {
                "ssl.ca.location": self.ssl_cafile,
                "ssl.certificate.location": self.ssl_certfile,
                "ssl.key.location": self.ssl_keyfile,
            }
            options |= {key: value for key, value in ssl.items() if value}
        return options

    def spark_options(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """Return the `kafka.`-prefixed options of Spark's Kafka source/sink (empty for PLAINTEXT).

        Spark's client is Kafka's Java client: SASL through `sasl.jaas.config` with the
        mechanism's login module; PEM files through `ssl.truststore.type=PEM` (KIP-651) and,
        for a client certificate, the PEM chain and key given as values.
        """
        self.validated(environ)
        if self.security_protocol == "PLAINTEXT":
            return {}
        options: dict[str, str] = {"kafka.security.protocol": self.security_protocol}
        if self.sasl:
            options["kafka.sasl.mechanism"] = self.sasl_mechanism
            options["kafka.sasl.jaas.config"] = Secret(
                f"{_LOGIN_MODULES[self.sasl_mechanism]} required "
                f'username="{_jaas_quoted(self.sasl_username)}" '
                f'password="{_jaas_quoted(self.password(environ))}";'
            )
        if self.tls and self.ssl_cafile:
            options["kafka.ssl.truststore.type"] = "PEM"
            options["kafka.ssl.truststore.location"] = self.ssl_cafile
        if self.tls and self.ssl_certfile:
            options["kafka.ssl.keystore.type"] = "PEM"
            options["kafka.ssl.keystore.certificate.chain"] = Path(self.ssl_certfile).read_text()
            options["kafka.ssl.keystore.key"] = Secret(Path(self.ssl_keyfile).read_text())
        return options


def _jaas_quoted(value: str) -> str:
    """Return `value` escaped for a double-quoted JAAS option value."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def security_problems(security: KafkaSecurity, environ: Mapping[str, str]) -> list[str]:
    """Return every impossible security setting, each as one sentence naming its key."""
    s = security
    if s.security_protocol not in PROTOCOLS:
        return [
            f"kafka.security_protocol must be one of {', '.join(PROTOCOLS)}, "
            f"not {s.security_protocol!r}"
        ]
    found = []
    if s.sasl:
        if s.sasl_mechanism not in MECHANISMS:
            found.append(
                f"kafka.sasl_mechanism must be one of {', '.join(MECHANISMS)} with "
                f"{s.security_protocol}, not {s.sasl_mechanism!r}"
            )
        if not s.sasl_username:
            found.append(f"kafka.sasl_username is required with {s.security_protocol}")
        if bool(s.sasl_password_file) == bool(s.sasl_password_env):
            found.append(
                f"{s.security_protocol} needs exactly one of kafka.sasl_password_file"
                " and kafka.sasl_password_env (a password itself is never a setting)"
            )
        elif s.sasl_password_env and s.sasl_password_env not in environ:
            found.append(f"kafka.sasl_password_env names ${s.sasl_password_env}, which is not set")
    else:
        unused = [f.name for f in fields(s) if f.name.startswith("sasl_") and getattr(s, f.name)]
        found += [
            f"kafka.{name} is set but {s.security_protocol} does not use SASL" for name in unused
        ]
    if not s.tls:
        unused = [f.name for f in fields(s) if f.name.startswith("ssl_") and getattr(s, f.name)]
        found += [
            f"kafka.{name} is set but {s.security_protocol} does not use TLS" for name in unused
        ]
    if bool(s.ssl_certfile) != bool(s.ssl_keyfile):
        found.append(
            "kafka.ssl_certfile and kafka.ssl_keyfile go together (a client "
            "certificate needs its key)"
        )
    files = ("sasl_password_file", "ssl_cafile", "ssl_certfile", "ssl_keyfile")
    for name in files:
        path = getattr(s, name)
        if path and not Path(path).is_file():
            found.append(f"kafka.{name} {path!r} is not a readable file")
        elif (
            path
            and name in SECRET_FILES
            and (problem := private_file_problem(Path(path), f"kafka.{name}"))
        ):
            found.append(problem)
    return found


#: The settings naming a file whose content is a secret (coordinator/core/secret_files.py).
SECRET_FILES = ("sasl_password_file", "ssl_keyfile")

#: How kafka-python logs a refusal of the broker (Kafka error codes 58, SASL, and 31, ...).
_REFUSAL = re.compile(
    r"(SaslAuthenticationFailedError|SslAuthenticationFailed|"
    r"UnsupportedSaslMechanism)[^\n]*"
)


class AuthenticationWatch(logging.Handler):
    """Tell "wrong credentials" from "unreachable" when a client cannot connect.

    kafka-python retries a refused SASL login until its bootstrap timeout and then raises
    only "Unable to bootstrap"; the broker's refusal is logged at best (usually the broker
    just closes the connection after the wrong proof). Used around a client's construction,
    this keeps a logged refusal and, on failure, checks whether the broker's port accepts
    TCP connections: if it does and SASL is configured, the login is what failed::

        with AuthenticationWatch(bootstrap_servers, security) as watch:
            producer = KafkaProducer(...)   # raises KafkaTimeoutError after the timeout
        ... raise TransportError(f"cannot connect: {exc}{watch.hint}")
    """

    def __init__(self, bootstrap_servers: str, security: KafkaSecurity | None) -> None:
        super().__init__(logging.DEBUG)
        self.bootstrap_servers = bootstrap_servers
        self.security = security or KafkaSecurity()
        self.refusal: str | None = None
        self._logger = logging.getLogger("kafka")

    def emit(self, record: logging.LogRecord) -> None:
        """Keep the first refusal of the broker (its text names no secret)."""
        if self.refusal is None and (found := _REFUSAL.search(record.getMessage())):
            self.refusal = found.group(0)

    @property
    def hint(self) -> str:
        """Return why the login probably failed ("" when nothing points at the login)."""
        s = self.security
        if self.refusal is not None:
            return (
                f"; the broker refused the SASL login as {s.sasl_username!r}: "
                f"authentication failed ({self.refusal})"
            )
        if s.sasl and reachable(self.bootstrap_servers):
            return (
                f"; the broker accepts connections but the SASL login as "
                f"{s.sasl_username!r} ({s.sasl_mechanism} over {s.security_protocol}) did "
                f"not complete: authentication failed? check the user name, the password "
                f"(kafka.sasl_password_file / _env) and the mechanism"
            )
        return ""

    def __enter__(self) -> AuthenticationWatch:
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._logger.removeHandler(self)


def reachable(bootstrap_servers: str, timeout: float = 2.0) -> bool:
    """Return True if any bootstrap server accepts a TCP connection."""
    for server in bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            continue
    return False
