"""contract 5.1 auth: 401 without a valid token, 403 for another group's work or a consumer
group and topic not granted, admin everywhere."""

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
from coordinator.rest.auth import (
    OPEN_MODE,
    Authenticator,
    ConsumeGrant,
    Principal,
    load_token_file,
    require_consume,
    sha256_hex,
)
from coordinator.rest.errors import ApiError
from tests.coordinator.rest.conftest import (
    ADMIN_TOKEN,
    BILLING_TOKEN,
    LEDGER_TOKEN,
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
    assert billing.consume == (ConsumeGrant("billing-readers", frozenset({"Billing"})),)
    ledger = auth.authenticate(LEDGER_TOKEN)
    assert (ledger.group, ledger.admin, ledger.name) == (None, False, "ledger")
    assert not ledger.may_act_for("ledger")
    assert [grant.group for grant in ledger.consume] == ["ledger", "audit"]
    admin = auth.authenticate(ADMIN_TOKEN)
    assert admin.admin
    assert admin.name == "oncall"
    assert admin.may_act_for("anything")
    assert not auth.open_mode


# -- consume grants: consumer groups apart from producer groups (issue 61, finding 1) ------

ORDERS = Principal(group="orders", admin=False, name="group orders")
BOTH = Principal(
    group="billing",
    admin=False,
    name="group billing",
    consume=(ConsumeGrant("billing-readers", frozenset({"Billing"})),),
)
LEDGER = Principal(
    group=None,
    admin=False,
    name="ledger",
    consume=(
        ConsumeGrant("ledger", frozenset({"Billing", "OrderPaid"})),
        ConsumeGrant("audit", frozenset({"*"})),
    ),
)
ADMIN = Principal(group=None, admin=True, name="oncall")


@pytest.mark.parametrize(
    ("who", "group", "topic", "allowed"),
    [
        # A producer token consumes nothing, not even as the consumer group of its name.
        (ORDERS, "orders", "OrderPaid", False),
        (ORDERS, "orders", None, False),
        (ORDERS, "billing-readers", "Billing", False),
        # Exact topics: the granted ones, as the granted group only.
        (BOTH, "billing-readers", "Billing", True),
        (BOTH, "billing-readers", None, True),
        (BOTH, "billing-readers", "billing", False),  # topics are case-sensitive
        (BOTH, "billing-readers", "OrderPaid", False),
        (BOTH, "billing", "Billing", False),  # its producer group is no consumer group
        (LEDGER, "ledger", "OrderPaid", True),
        (LEDGER, "ledger", "Refunds", False),
        (LEDGER, "Ledger", "Billing", False),
        # "*": every topic, those made later too, for that group only.
        (LEDGER, "audit", "Anything-made-later", True),
        (LEDGER, "audit2", "Billing", False),
        # Admins and open mode: every group, every topic.
        (ADMIN, "orders", "Payments", True),
        (OPEN_MODE, "anyone", "Anything", True),
    ],
)
def test_a_token_consumes_only_as_granted(
    who: Principal, group: str, topic: str | None, allowed: bool
) -> None:
    assert who.may_consume(group, topic) is allowed
    if allowed:
        require_consume(who, group, topic)
    else:
        with pytest.raises(ApiError) as refused:
            require_consume(who, group, topic)
        assert (refused.value.status, refused.value.code) == (403, "forbidden")


def test_a_refusal_names_the_grant_to_add() -> None:
    """Who upgrades from producer tokens that consumed as their own group learns what to add."""
    with pytest.raises(ApiError) as refused:
        require_consume(ORDERS, "orders", "OrderPaid", ("group (path)", "topic"))
    message = refused.value.message
    assert message.startswith("group (path): token 'group orders' may not consume as consumer")
    assert '[[token.consume]] group = "orders" topics = ["OrderPaid"]' in message
    assert "not the consumer group of the same name" in message
    with pytest.raises(ApiError) as refused:
        require_consume(LEDGER, "ledger", "Refunds", ("group (path)", "topic"))
    message = refused.value.message
    assert message.startswith("topic: token 'ledger' may consume as consumer group 'ledger' on")
    assert "'Billing', 'OrderPaid' only, not 'Refunds'" in message
    assert 'add "Refunds" to the topics of its [[token.consume]] group = "ledger"' in message
    with pytest.raises(ApiError) as refused:
        require_consume(LEDGER, "orders", None)
    assert "same name" not in refused.value.message  # ledger produces for no group


def test_a_file_of_producer_tokens_only_still_loads_and_says_none_consumes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An auth file written before consume grants: producer rights unchanged, no consumer."""
    path = tmp_path / "tokens.toml"
    path.write_text(f'[[token]]\ngroup = "orders"\nsha256 = "{DIGEST}"\n')
    path.chmod(0o600)
    caplog.set_level(logging.INFO, "txcoord.rest.auth")
    (entry,) = load_token_file(path)
    assert entry.principal == Principal(group="orders", admin=False, name="group orders")
    assert not entry.principal.may_consume("orders")
    assert "grants no consumer group" in caplog.text
    assert "[[token.consume]]" in caplog.text


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
CONSUME = '[[token.consume]]\ngroup = "g"\ntopics = ["T"]\n'
NO_RIGHT = f'[[token]]\nsha256 = "{DIGEST}"\n'  # a token before its rights
GRANT_G = f'{NO_RIGHT}[[token.consume]]\ngroup = "g"\n'  # a grant before its topics


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "defines no \\[\\[token\\]\\]"),
        ("token = 5\n", "defines no"),
        ("users = []\n", "unknown key"),
        (f'[[token]]\ngroup = "g"\nsha256 = "{DIGEST}"\nexpires = 1\n', "unknown key.*expires"),
        (f'[[token]]\nsha256 = "{DIGEST}"\n', "needs a right: group .* or admin = true"),
        (f'[[token]]\ngroup = "g"\nadmin = true\nsha256 = "{DIGEST}"\n', "admin token acts"),
        (f'[[token]]\nadmin = true\nsha256 = "{DIGEST}"\n{CONSUME}', "drop its group and consume"),
        (f"{NO_RIGHT}consume = []\n", "consume must be"),
        (f'{NO_RIGHT}consume = "g"\n', "consume must be"),
        (f'{NO_RIGHT}consume = ["g"]\n', "consume #1 must be a table"),
        (f'{NO_RIGHT}{CONSUME}topic = "T"\n', "unknown key.*topic;"),
        (f'{NO_RIGHT}[[token.consume]]\ntopics = ["T"]\n', r"consume #1: group \(a consumer"),
        (f'{NO_RIGHT}[[token.consume]]\ngroup = "a b"\ntopics = ["T"]\n', "must match"),
        (f"{GRANT_G}", "non-empty list"),
        (f"{GRANT_G}topics = []\n", "non-empty list"),
        (f'{GRANT_G}topics = "T"\n', "non-empty list"),
        (f'{GRANT_G}topics = ["a/b"]\n', "topics: topic must be"),
        (f'{GRANT_G}topics = ["T*"]\n', "topics: topic must be"),  # no patterns but "*"
        (f'{GRANT_G}topics = ["system"]\n', "system topic"),
        (f"{GRANT_G}topics = [5]\n", "topic must be a string"),
        (f"{NO_RIGHT}{CONSUME}{CONSUME}", "'g' is granted twice"),
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
def test_a_consume_only_token_acts_for_no_producer_group(
    auth_client: TestClient, watch: OffsetWatch
) -> None:
    ledger = bearer(LEDGER_TOKEN)
    before = watch.snapshot()
    calls = [
        ("POST", "/v1/transactions", {**HALF, "producer_group": "ledger"}),
        ("POST", "/v1/transactions/t/commit", {"producer_group": "ledger"}),
        ("GET", "/v1/transactions/t", None),  # no group of its own to imply
        ("GET", "/v1/transactions/t?producer_group=ledger", None),
        ("GET", "/v1/check-requests?producer_group=ledger&wait_seconds=0", None),
    ]
    for method, path, body in calls:
        answer = auth_client.request(method, path, json=body, headers=ledger)
        assert answer.status_code == 403, (path, answer.text)
        assert "acts for no producer group" in answer.json()["message"], path
    assert unchanged(watch, before)


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
