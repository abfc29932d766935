"""Kafka security settings: one `[kafka]` setting, three spellings, secrets that never show."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from coordinator.core.config import load_config
from coordinator.core.errors import ConfigurationError
from coordinator.core.kafka_security import KafkaSecurity, Secret
from coordinator.rest.app import create_app

PASSWORD = 's3cr3t-"quoted"-\\back'  # a quote and a backslash: JAAS must escape both


@pytest.fixture
def password_file(tmp_path: Path) -> Path:
    path = tmp_path / "kafka.password"
    path.write_text(PASSWORD + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def pem(tmp_path: Path) -> dict[str, str]:
    files = {}
    for name in ("ca", "cert", "key"):
        path = tmp_path / f"{name}.pem"
        path.write_text(f"-----BEGIN {name.upper()}-----\nAAAA\n-----END {name.upper()}-----\n")
        path.chmod(0o600)
        files[name] = str(path)
    return files


def test_plaintext_is_the_default_and_changes_no_client() -> None:
    security = load_config().kafka.security
    assert security == KafkaSecurity()
    assert security.client_options() == {}
    assert security.librdkafka_options() == {}
    assert security.spark_options() == {}


def test_sasl_scram_from_a_password_file(password_file: Path) -> None:
    config = load_config(
        overrides={
            "kafka.security_protocol": "SASL_PLAINTEXT",
            "kafka.sasl_mechanism": "SCRAM-SHA-256",
            "kafka.sasl_username": "orders-app",
            "kafka.sasl_password_file": str(password_file),
            "kafka.topics_per_group": "true",
        }
    )
    security = config.kafka.security
    assert security.client_options() == {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "orders-app",
        "sasl_plain_password": PASSWORD,  # the trailing newline of the file is not part of it
    }
    assert security.librdkafka_options() == {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "orders-app",
        "sasl.password": PASSWORD,
    }
    assert security.spark_options() == {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "SCRAM-SHA-256",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="orders-app" password="s3cr3t-\\"quoted\\"-\\\\back";',
    }


def test_sasl_plain_over_tls_from_the_environment(pem: dict[str, str]) -> None:
    security = KafkaSecurity(
        security_protocol="SASL_SSL",
        sasl_mechanism="PLAIN",
        sasl_username="u",
        sasl_password_env="KAFKA_PW",
        ssl_cafile=pem["ca"],
    )
    environ = {"KAFKA_PW": "pw"}
    assert security.client_options(environ) == {
        "security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "u", "sasl_plain_password": "pw", "ssl_cafile": pem["ca"],
    }  # fmt: skip
    assert security.librdkafka_options(environ) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "u",
        "sasl.password": "pw", "ssl.ca.location": pem["ca"],
    }  # fmt: skip
    spark = security.spark_options(environ)
    assert spark["kafka.sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
        'password="pw";'
    )
    assert spark["kafka.ssl.truststore.type"] == "PEM"
    assert spark["kafka.ssl.truststore.location"] == pem["ca"]


def test_mutual_tls_gives_the_pem_chain_and_key_to_spark(pem: dict[str, str]) -> None:
    security = KafkaSecurity(
        security_protocol="SSL",
        ssl_cafile=pem["ca"],
        ssl_certfile=pem["cert"],
        ssl_keyfile=pem["key"],
    )
    assert security.client_options() == {
        "security_protocol": "SSL", "ssl_cafile": pem["ca"], "ssl_certfile": pem["cert"],
        "ssl_keyfile": pem["key"],
    }  # fmt: skip
    assert security.librdkafka_options() == {
        "security.protocol": "SSL", "ssl.ca.location": pem["ca"],
        "ssl.certificate.location": pem["cert"], "ssl.key.location": pem["key"],
    }  # fmt: skip
    spark = security.spark_options()
    assert spark["kafka.ssl.keystore.type"] == "PEM"
    assert spark["kafka.ssl.keystore.certificate.chain"] == Path(pem["cert"]).read_text()
    assert spark["kafka.ssl.keystore.key"] == Path(pem["key"]).read_text()
    assert "kafka.sasl.jaas.config" not in spark


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kafka.security_protocol": "TLS"}, "must be one of PLAINTEXT, SSL"),
        (
            {
                "kafka.security_protocol": "SASL_SSL",
                "kafka.sasl_mechanism": "GSSAPI",
                "kafka.sasl_username": "u",
                "kafka.sasl_password_env": "HOME",
            },
            "kafka.sasl_mechanism must be one of PLAIN",
        ),
        (
            {"kafka.security_protocol": "SASL_PLAINTEXT", "kafka.sasl_mechanism": "PLAIN"},
            "kafka.sasl_username is required",
        ),
        (
            {
                "kafka.security_protocol": "SASL_PLAINTEXT",
                "kafka.sasl_mechanism": "PLAIN",
                "kafka.sasl_username": "u",
            },
            "needs exactly one of kafka.sasl_password_file",
        ),
        (
            {
                "kafka.security_protocol": "SASL_PLAINTEXT",
                "kafka.sasl_mechanism": "PLAIN",
                "kafka.sasl_username": "u",
                "kafka.sasl_password_env": "TXCOORD_TEST_UNSET_VARIABLE",
            },
            "$TXCOORD_TEST_UNSET_VARIABLE, which is not set",
        ),
        (
            {
                "kafka.security_protocol": "SASL_PLAINTEXT",
                "kafka.sasl_mechanism": "PLAIN",
                "kafka.sasl_username": "u",
                "kafka.sasl_password_file": "/no/such/file",
            },
            "kafka.sasl_password_file '/no/such/file' is not a readable file",
        ),
        (
            {"kafka.security_protocol": "SSL", "kafka.ssl_cafile": "/no/ca.pem"},
            "kafka.ssl_cafile '/no/ca.pem' is not a readable file",
        ),
        (
            {"kafka.security_protocol": "SSL", "kafka.ssl_certfile": "/etc/hostname"},
            "kafka.ssl_certfile and kafka.ssl_keyfile go together",
        ),
        ({"kafka.sasl_username": "u"}, "kafka.sasl_username is set but PLAINTEXT does not use"),
        ({"kafka.ssl_cafile": "/etc/hostname"}, "kafka.ssl_cafile is set but PLAINTEXT does not"),
        (
            {"kafka.replication_factor": "3", "kafka.min_insync_replicas": "4"},
            "kafka.min_insync_replicas (4) must be 1..kafka.replication_factor (3)",
        ),
    ],
)
def test_impossible_settings_are_refused_with_the_key(
    overrides: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_config(overrides=overrides)
    assert message in str(caught.value)


def test_replication_settings_are_read() -> None:
    kafka = load_config(
        overrides={"kafka.replication_factor": "3", "kafka.min_insync_replicas": "2"}
    ).kafka
    assert (kafka.replication_factor, kafka.min_insync_replicas) == (3, 2)
    assert (KafkaSecurity().sasl, KafkaSecurity().tls) == (False, False)


def test_secrets_never_appear_in_repr_str_errors_or_logs(
    password_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config = load_config(
        overrides={
            "kafka.security_protocol": "SASL_SSL",
            "kafka.sasl_mechanism": "SCRAM-SHA-512",
            "kafka.sasl_username": "orders-app",
            "kafka.sasl_password_file": str(password_file),
            "kafka.topics_per_group": "true",
        }
    )
    client = config.kafka.security.client_options()
    librdkafka = config.kafka.security.librdkafka_options()
    spark = config.kafka.security.spark_options()
    logging.getLogger("txcoord.test").info("client %s %s spark %s", client, librdkafka, spark)
    shown = [
        repr(config),
        str(config),
        repr(config.kafka.security),
        repr(client),
        str(client),
        repr(librdkafka),
        str(librdkafka),
        repr(spark),
        str(spark),
        caplog.text,
    ]
    for text in shown:
        assert "s3cr3t" not in text
    assert "'***'" in repr(client)
    with pytest.raises(ConfigurationError) as caught:
        load_config(
            overrides={
                "kafka.security_protocol": "SASL_SSL",
                "kafka.sasl_password_file": str(password_file),
            }
        )
    assert "s3cr3t" not in str(caught.value)
    # The value itself is intact for the client that needs it.
    assert isinstance(client["sasl_plain_password"], Secret)
    assert client["sasl_plain_password"].encode() == PASSWORD.encode()


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o602])
def test_a_password_file_others_may_read_is_refused(password_file: Path, mode: int) -> None:
    password_file.chmod(mode)
    with pytest.raises(ConfigurationError, match=r"kafka\.sasl_password_file .*chmod 600"):
        load_config(
            overrides={
                "kafka.security_protocol": "SASL_PLAINTEXT",
                "kafka.sasl_mechanism": "SCRAM-SHA-256",
                "kafka.sasl_username": "orders-app",
                "kafka.sasl_password_file": str(password_file),
            }
        )


def test_a_client_key_others_may_read_is_refused(pem: dict[str, str]) -> None:
    Path(pem["key"]).chmod(0o644)
    security = KafkaSecurity(
        security_protocol="SSL",
        ssl_cafile=pem["ca"],
        ssl_certfile=pem["cert"],
        ssl_keyfile=pem["key"],
    )
    with pytest.raises(ConfigurationError, match=r"kafka\.ssl_keyfile .*chmod 600"):
        security.validated({})
    Path(pem["ca"]).chmod(0o644)  # a CA or a certificate is no secret
    Path(pem["cert"]).chmod(0o644)
    Path(pem["key"]).chmod(0o600)
    assert security.validated({}) is security


def secured(password_file: Path, **more: str) -> dict[str, str]:
    return {
        "kafka.security_protocol": "SASL_PLAINTEXT",
        "kafka.sasl_mechanism": "SCRAM-SHA-256",
        "kafka.sasl_username": "orders-app",
        "kafka.sasl_password_file": str(password_file),
        **more,
    }


def test_authenticated_clients_on_the_shared_topics_are_refused(password_file: Path) -> None:
    """Any principal that may write the op topic would act for every group."""
    with pytest.raises(ConfigurationError, match=r"groups are not kept apart.*topics_per_group"):
        load_config(overrides=secured(password_file))


def test_a_client_certificate_is_authentication_too(pem: dict[str, str]) -> None:
    mutual = {
        "kafka.security_protocol": "SSL",
        "kafka.ssl_cafile": pem["ca"],
        "kafka.ssl_certfile": pem["cert"],
        "kafka.ssl_keyfile": pem["key"],
    }
    with pytest.raises(ConfigurationError, match="groups are not kept apart"):
        load_config(overrides=mutual)
    load_config(overrides={"kafka.security_protocol": "SSL", "kafka.ssl_cafile": pem["ca"]})


def test_no_isolation_runs_when_accepted_and_says_so_at_start(
    password_file: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_config(
        overrides=secured(
            password_file, **{"kafka.accept_no_group_isolation": "true", "warehouse": str(tmp_path)}
        )
    )
    caplog.set_level(logging.WARNING)
    create_app(config)  # the REST ingress; the engine logs the same line at its start
    assert "groups are not kept apart" in caplog.text
    assert load_config(overrides=secured(password_file, **{"kafka.topics_per_group": "true"}))
