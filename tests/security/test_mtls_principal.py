"""Issue 61, finding 6: with mutual TLS and no SASL, the engine's principal is its certificate's.

Before, the engine took itself to be `ANONYMOUS` whenever it had no SASL user, so with a
client certificate its trusted operator topic became `txcoord.operator.ANONYMOUS` and
`txcoord provision` counted `User:ANONYMOUS` grants as the engine's, while the broker knew it
as the certificate's subject. Now the principal is the subject, as Kafka spells it, or
`kafka.client_principal` where the broker's ssl.principal.mapping.rules shorten it; a subject
that cannot name a topic stops the per-group layout at start with the setting to use.
"""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from coordinator.admin.shared_topics import engine_topics
from coordinator.core.certificate_subject import subject_of
from coordinator.core.config import load_config
from coordinator.core.errors import ConfigurationError

ENGINE = x509.Name(
    [
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Acme"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "payments"),
        x509.NameAttribute(NameOID.COMMON_NAME, "engine"),
    ]
)


def certificate(folder: Path, subject: x509.Name = ENGINE) -> tuple[Path, Path]:
    """Write a self-signed client certificate for `subject`, and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    certfile, keyfile = folder / "engine.pem", folder / "engine.key"
    certfile.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    keyfile.touch(mode=0o600)
    keyfile.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return certfile, keyfile


def mtls(tmp_path: Path, **more: str) -> dict[str, str]:
    certfile, keyfile = certificate(tmp_path)
    return {
        "warehouse": str(tmp_path / "warehouse"),
        "kafka.security_protocol": "SSL",
        "kafka.ssl_certfile": str(certfile),
        "kafka.ssl_keyfile": str(keyfile),
        "kafka.accept_no_group_isolation": "true",
        **more,
    }


def test_the_engine_is_its_certificates_subject_not_anonymous(tmp_path: Path) -> None:
    config = load_config(overrides=mtls(tmp_path))
    assert config.kafka.principal == "CN=engine,OU=payments,O=Acme"


def test_a_mapped_principal_names_the_operator_topic(tmp_path: Path) -> None:
    settings = mtls(tmp_path, **{"kafka.client_principal": "engine"})
    config = load_config(overrides={**settings, "kafka.topics_per_group": "true"})
    assert config.kafka.principal == "engine"
    assert "txcoord.operator.engine" in engine_topics(config)


def test_a_subject_that_cannot_name_a_topic_stops_the_per_group_layout_at_start(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigurationError) as refused:
        load_config(overrides=mtls(tmp_path, **{"kafka.topics_per_group": "true"}))
    assert "the subject of kafka.ssl_certfile" in str(refused.value)
    assert "kafka.client_principal" in str(refused.value)


def test_without_a_certificate_the_engine_is_anonymous(tmp_path: Path) -> None:
    assert load_config(overrides={"warehouse": str(tmp_path)}).kafka.principal == "ANONYMOUS"


@pytest.mark.parametrize(
    "name",
    [
        [("CN", "engine")],
        [("C", "DE"), ("O", "Acme, Inc."), ("OU", "pay+ments"), ("CN", " lead;er ")],
        [("DC", "com"), ("DC", "example"), ("UID", "u1"), ("CN", '#quoted "x"')],
        [("O", "Ünïcode ✓"), ("L", "Köln"), ("ST", "NRW"), ("CN", "back\\slash<>")],
    ],
)
def test_the_subject_is_spelled_as_the_certificate_library_spells_rfc_2253(
    tmp_path: Path, name: list[tuple[str, str]]
) -> None:
    oids = {"CN": NameOID.COMMON_NAME, "C": NameOID.COUNTRY_NAME, "O": NameOID.ORGANIZATION_NAME,
            "OU": NameOID.ORGANIZATIONAL_UNIT_NAME, "L": NameOID.LOCALITY_NAME,
            "ST": NameOID.STATE_OR_PROVINCE_NAME, "DC": NameOID.DOMAIN_COMPONENT,
            "UID": NameOID.USER_ID}  # fmt: skip
    subject = x509.Name([x509.NameAttribute(oids[kind], value) for kind, value in name])
    certfile, _ = certificate(tmp_path, subject)
    assert subject_of(str(certfile)) == subject.rfc4514_string()
