"""The [kafka] part of the auth file: principals, refusals that explain, broker properties."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.core.errors import ConfigurationError
from coordinator.core.topics import TopicLayout
from coordinator.runtime.local_stack.broker_auth import AUTHORIZER, acls, load_broker_auth

GOOD_PASSWORD = "Zq3-abcdefghijklmnop"


def write(root: Path, kafka_part: str, password: str = GOOD_PASSWORD) -> Path:
    for name in ("engine", "operator", "orders"):
        (root / f"{name}.pw").write_text(password + "\n")
        (root / f"{name}.pw").chmod(0o600)
    path = root / "auth.toml"
    path.write_text('[[token]]\ngroup = "orders"\nsha256 = "' + "0" * 64 + '"\n' + kafka_part)
    return path


ENGINE_AND_OPERATOR = """
[kafka.engine]
principal = "txcoord-engine"
password_file = "engine.pw"
[kafka.operator]
principal = "txcoord-operator"
password_file = "operator.pw"
"""
ORDERS = """
[[kafka.group]]
group = "orders"
principal = "orders-app"
password_file = "orders.pw"
"""


def test_without_a_kafka_part_the_broker_stays_open(tmp_path: Path) -> None:
    assert load_broker_auth(write(tmp_path, "")) is None


def test_principals_are_read_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    auth = load_broker_auth(write(tmp_path, ENGINE_AND_OPERATOR + ORDERS))
    assert auth is not None
    assert [p.name for p in auth.principals] == ["txcoord-engine", "txcoord-operator", "orders-app"]
    assert auth.groups["orders"].password_file == (tmp_path / "orders.pw").resolve()
    assert auth.groups["orders"].password() == GOOD_PASSWORD
    assert GOOD_PASSWORD not in repr(auth)
    security = auth.engine_security
    assert (security.security_protocol, security.sasl_mechanism) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-256",
    )
    properties = auth.server_properties("127.0.0.1", 9092, 9093)
    assert properties["authorizer.class.name"] == AUTHORIZER
    assert properties["super.users"] == "User:txcoord-engine"
    assert properties["allow.everyone.if.no.acl.found"] == "false"
    assert properties["listeners"] == "CLIENT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"
    assert auth.scram_arguments()[0] == (
        f"--add-scram=SCRAM-SHA-256=[name=txcoord-engine,password={GOOD_PASSWORD}]"
    )


def test_the_acls_are_per_group_and_operator(tmp_path: Path) -> None:
    auth = load_broker_auth(write(tmp_path, ENGINE_AND_OPERATOR + ORDERS))
    assert auth is not None
    layout = TopicLayout(half="h", op="o", check="c", operator="x", per_group=True)
    granted = {
        (
            a.principal,
            a.operation.name,
            a.resource_pattern.resource_type.name,
            a.resource_pattern.resource_name,
            a.resource_pattern.pattern_type.name,
        )
        for a in acls(auth, layout)
    }
    assert granted == {
        ("User:txcoord-operator", "WRITE", "TOPIC", "x.txcoord-operator", "LITERAL"),
        ("User:orders-app", "WRITE", "TOPIC", "h.orders", "LITERAL"),
        ("User:orders-app", "WRITE", "TOPIC", "o.orders", "LITERAL"),
        ("User:orders-app", "READ", "TOPIC", "c.orders", "LITERAL"),
        ("User:orders-app", "WRITE", "TOPIC", "c.orders", "LITERAL"),  # claims (check_claim.py)
        ("User:orders-app", "READ", "GROUP", "txcoord-sdk-orders", "LITERAL"),
    }
    # With the warehouse: the engine's transactional ids too (streams/kafka_io/kafka_fence.py).
    engine = {
        (a.principal, a.operation.name, a.resource_pattern.resource_type.name)
        for a in acls(auth, layout, "/data/warehouse")
        if a.principal == "User:txcoord-engine"
    }
    assert engine == {
        ("User:txcoord-engine", "WRITE", "TRANSACTIONAL_ID"),
        ("User:txcoord-engine", "DESCRIBE", "TRANSACTIONAL_ID"),
    }
    assert len(acls(auth, layout, "/data/warehouse")) == len(granted) + 4  # two ids


def test_acls_need_the_per_group_layout_and_groups_kafka_can_name(tmp_path: Path) -> None:
    auth = load_broker_auth(
        write(
            tmp_path, ENGINE_AND_OPERATOR + ORDERS.replace('group = "orders"', 'group = "or%ders"')
        )
    )
    assert auth is not None
    with pytest.raises(ConfigurationError, match="topics_per_group = true"):
        acls(auth, TopicLayout())
    with pytest.raises(ConfigurationError, match="cannot have Kafka topics of its own"):
        acls(auth, TopicLayout(per_group=True))


@pytest.mark.parametrize(
    ("kafka_part", "password", "message"),
    [
        ("[kafka]\nusers = 1\n", GOOD_PASSWORD, "knows engine, operator"),
        (
            ENGINE_AND_OPERATOR.replace("operator.pw", "missing.pw"),
            GOOD_PASSWORD,
            "cannot read password_file",
        ),
        (ENGINE_AND_OPERATOR, "short", "must be 16..256 characters"),
        (ENGINE_AND_OPERATOR, "has,comma-and]bracket", "must be 16..256 characters"),
        (
            ENGINE_AND_OPERATOR.replace("txcoord-operator", "txcoord-engine"),
            GOOD_PASSWORD,
            "every principal must be a different user",
        ),
        (ENGINE_AND_OPERATOR + ORDERS + ORDERS, GOOD_PASSWORD, "must be a new producer group"),
        (
            ENGINE_AND_OPERATOR + '[kafka.tls]\ncertfile = "x.pem"\n',
            GOOD_PASSWORD,
            "needs readable certfile, keyfile and cafile",
        ),
    ],
)
def test_bad_auth_files_are_refused_with_a_reason(
    tmp_path: Path, kafka_part: str, password: str, message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message) as caught:
        load_broker_auth(write(tmp_path, kafka_part, password))
    assert password not in str(caught.value) or password == GOOD_PASSWORD


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o620, 0o604])
def test_a_password_file_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    path = write(tmp_path, ENGINE_AND_OPERATOR)
    (tmp_path / "operator.pw").chmod(mode)
    with pytest.raises(ConfigurationError, match=r"operator.*password_file.*chmod 600"):
        load_broker_auth(path)


def test_a_password_file_of_its_owner_only_is_accepted(tmp_path: Path) -> None:
    path = write(tmp_path, ENGINE_AND_OPERATOR)
    (tmp_path / "operator.pw").chmod(0o400)
    assert load_broker_auth(path) is not None
