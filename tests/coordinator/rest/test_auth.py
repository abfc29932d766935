"""contract 5.1 auth: 401 without a valid token, 403 for another group's work, admin everywhere."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from coordinator.core.config import Config
from coordinator.core.errors import ConfigurationError
from coordinator.protocol import ingress as fmt
from coordinator.rest.auth import Authenticator, load_token_file, sha256_hex
from coordinator.rest.errors import ApiError
from tests.coordinator.rest.conftest import (
    ADMIN_TOKEN,
    BILLING_TOKEN,
    ORDERS_TOKEN,
    bearer,
    write_auth_file,
)
from tests.coordinator.rest.kafka_io import OffsetWatch, read_all

HALF = {"producer_group": "orders", "topic": "OrderPaid", "body": "b"}


# -- the token file ---------------------------------------------------------------------


def test_the_token_file_binds_tokens_to_groups_and_admins(tmp_path: Path) -> None:
    auth = Authenticator(load_token_file(write_auth_file(tmp_path / "t.toml")))
    orders = auth.authenticate(ORDERS_TOKEN)
    assert (orders.group, orders.admin) == ("orders", False)
    assert orders.may_act_for("orders")
    assert not orders.may_act_for("billing")
    billing = auth.authenticate(BILLING_TOKEN)
    assert (billing.group, billing.admin) == ("billing", False)
    admin = auth.authenticate(ADMIN_TOKEN)
    assert admin.admin
    assert admin.name == "oncall"
    assert admin.may_act_for("anything")
    assert not auth.open_mode


@pytest.mark.parametrize("token", [None, "", "nope", ORDERS_TOKEN + " ", ORDERS_TOKEN.upper()])
def test_anything_but_a_listed_token_is_401(tmp_path: Path, token: str | None) -> None:
    auth = Authenticator(load_token_file(write_auth_file(tmp_path / "t.toml")))
    with pytest.raises(ApiError) as caught:
        auth.authenticate(token)
    assert caught.value.status == 401
    assert caught.value.headers["WWW-Authenticate"].startswith("Bearer")


def test_without_a_file_every_caller_is_trusted() -> None:
    auth = Authenticator.from_auth_file("")
    assert auth.open_mode
    assert auth.authenticate(None).may_act_for("any-group")


LONG = "s" * 16
DIGEST = sha256_hex(LONG)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "defines no \\[\\[token\\]\\]"),
        ("token = 5\n", "defines no"),
        ("users = []\n", "unknown key"),
        (f'[[token]]\ngroup = "g"\nsha256 = "{DIGEST}"\nexpires = 1\n', "unknown key.*expires"),
        (f'[[token]]\nsha256 = "{DIGEST}"\n', "exactly one of group and admin"),
        (f'[[token]]\ngroup = "g"\nadmin = true\nsha256 = "{DIGEST}"\n', "exactly one of group"),
        (f'[[token]]\nadmin = "yes"\nsha256 = "{DIGEST}"\n', "admin must be true or false"),
        (f'[[token]]\ngroup = "a b"\nsha256 = "{DIGEST}"\n', "group must match"),
        ('[[token]]\ngroup = "g"\nsha256 = "abc"\n', "64 hex digits"),
        ('[[token]]\ngroup = "g"\n', "exactly one of sha256 and token"),
        (f'[[token]]\ngroup = "g"\nsha256 = "{DIGEST}"\ntoken = "s"\n', "exactly one of sha256"),
        ('[[token]]\ngroup = "g"\ntoken = " "\n', "non-empty"),
        (
            f'[[token]]\ngroup = "g"\nsha256 = "{DIGEST}"\n[[token]]\nadmin = true\n'
            f'token = "{LONG}"\n',
            "same token",
        ),
        ("[[token\n", "not valid TOML"),
    ],
)
def test_a_bad_token_file_is_refused_at_start(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(text)
    path.chmod(0o600)
    with pytest.raises(ConfigurationError, match=message):
        load_token_file(path)


def test_a_missing_token_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="does not exist"):
        Authenticator.from_auth_file(str(tmp_path / "absent.toml"))


def test_a_plaintext_token_never_reaches_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    load_token_file(write_auth_file(tmp_path / "t.toml"))
    assert "plaintext" in caplog.text
    assert BILLING_TOKEN not in caplog.text


# -- the matrix, against the real app and broker ----------------------------------------


@pytest.fixture
def watch(auth_config: Config) -> Iterator[OffsetWatch]:
    offsets = OffsetWatch(
        auth_config.kafka.bootstrap_servers,
        [auth_config.kafka.half_topic, auth_config.kafka.op_topic],
    )
    try:
        yield offsets
    finally:
        offsets.close()


def unchanged(watch: OffsetWatch, before: dict[tuple[str, int], int]) -> bool:
    return watch.snapshot() == before


@pytest.mark.kafka
@pytest.mark.parametrize(
    "headers",
    [
        {},
        bearer("wrong"),
        {"Authorization": f"Basic {ORDERS_TOKEN}"},
        {"Authorization": ORDERS_TOKEN},
        bearer(""),
    ],
    ids=["none", "wrong", "basic", "no-scheme", "empty"],
)
def test_every_v1_route_is_401_without_a_valid_token(
    auth_client: TestClient,
    watch: OffsetWatch,
    headers: dict[str, str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    before = watch.snapshot()
    calls = [
        ("POST", "/v1/transactions", HALF),
        ("POST", "/v1/transactions/batch", {"messages": [HALF]}),
        ("POST", "/v1/transactions/t/commit", {"producer_group": "orders"}),
        ("POST", "/v1/ops/batch",
         {"ops": [{"transaction_id": "t", "op": "COMMIT", "producer_group": "orders"}]}),
        ("GET", "/v1/transactions/t", None),
        ("GET", "/v1/check-requests?producer_group=orders&wait_seconds=0", None),
    ]  # fmt: skip
    for method, path, body in calls:
        answer = auth_client.request(method, path, json=body, headers=headers)
        assert answer.status_code == 401, (path, answer.text)
        assert answer.json()["error"] == "unauthorized"
        assert answer.headers["www-authenticate"].startswith("Bearer")
        assert ORDERS_TOKEN not in answer.text
    assert unchanged(watch, before)
    assert ORDERS_TOKEN not in caplog.text


@pytest.mark.kafka
def test_health_metrics_and_the_document_need_no_token(auth_client: TestClient) -> None:
    for path in ("/healthz", "/metrics", "/openapi.json"):
        assert auth_client.get(path).status_code == 200


@pytest.mark.kafka
def test_a_group_token_acts_for_its_own_group_only(
    auth_client: TestClient, auth_config: Config, watch: OffsetWatch
) -> None:
    orders = bearer(ORDERS_TOKEN)
    before = watch.snapshot()
    forbidden = [
        ("/v1/transactions", {**HALF, "producer_group": "billing"}, "producer_group"),
        ("/v1/transactions/batch",
         {"messages": [HALF, {**HALF, "producer_group": "billing"}]},
         "messages[1].producer_group"),
        ("/v1/transactions/t/commit", {"producer_group": "billing"}, "producer_group"),
        ("/v1/transactions/t/rollback", {"producer_group": "billing", "from_check": True},
         "producer_group"),
        ("/v1/ops/batch",
         {"ops": [{"transaction_id": "t", "op": "COMMIT", "producer_group": "orders"},
                  {"transaction_id": "u", "op": "ROLLBACK", "producer_group": "billing"}]},
         "ops[1].producer_group"),
        # An operator's op may end a DISCARDED transaction: admins only.
        ("/v1/transactions/t/commit", {"producer_group": "orders", "operator": "me"}, "operator"),
    ]  # fmt: skip
    for path, body, field in forbidden:
        answer = auth_client.post(path, json=body, headers=orders)
        assert answer.status_code == 403, (path, answer.text)
        assert answer.json()["error"] == "forbidden"
        assert field in answer.json()["message"]
    answer = auth_client.get(
        "/v1/check-requests?producer_group=billing&wait_seconds=0", headers=orders
    )
    assert answer.status_code == 403
    assert unchanged(watch, before)

    assert auth_client.post("/v1/transactions", json=HALF, headers=orders).status_code == 201
    answer = auth_client.post(
        "/v1/transactions/t/commit", json={"producer_group": "orders"}, headers=orders
    )
    assert answer.status_code == 202
    answer = auth_client.post(
        "/v1/transactions",
        json={**HALF, "producer_group": "billing"},
        headers=bearer(BILLING_TOKEN),
    )
    assert answer.status_code == 201
    answer = auth_client.get(
        "/v1/check-requests?producer_group=orders&wait_seconds=0", headers=orders
    )
    assert answer.status_code == 200
    assert len(read_all(auth_config.kafka.bootstrap_servers, auth_config.kafka.half_topic)) == 2


@pytest.mark.kafka
def test_an_admin_token_acts_for_every_group_and_as_operator(
    auth_client: TestClient, auth_config: Config
) -> None:
    admin = bearer(ADMIN_TOKEN)
    for group in ("orders", "billing", "someone-else"):
        answer = auth_client.post(
            "/v1/transactions", json={**HALF, "producer_group": group}, headers=admin
        )
        assert answer.status_code == 201, answer.text
    answer = auth_client.post(
        "/v1/transactions/t-discarded/commit",
        json={"producer_group": "billing", "operator": "alice", "reason": "customer paid"},
        headers=admin,
    )
    assert answer.status_code == 202, answer.text
    answer = auth_client.get(
        "/v1/check-requests?producer_group=billing&wait_seconds=0", headers=admin
    )
    assert answer.status_code == 200
    (op,) = read_all(auth_config.kafka.bootstrap_servers, auth_config.kafka.op_topic)
    headers = dict(op.headers)
    # Who is the authenticated token ("oncall"); the name the request gave stands beside it.
    assert headers[fmt.OPERATOR] == b"oncall (alice)"
    assert headers[fmt.REASON] == b"customer paid"


@pytest.mark.kafka
def test_open_mode_lets_every_caller_act_for_every_group(client: TestClient) -> None:
    for group in ("orders", "billing"):
        answer = client.post("/v1/transactions", json={**HALF, "producer_group": group})
        assert answer.status_code == 201
    answer = client.post(
        "/v1/transactions/t/commit", json={"producer_group": "orders", "operator": "dev"}
    )
    assert answer.status_code == 202
    assert client.get("/v1/check-requests?producer_group=x&wait_seconds=0").status_code == 200


def test_digests_compare_like_the_file_says() -> None:
    assert sha256_hex("abc") == hashlib.sha256(b"abc").hexdigest()
