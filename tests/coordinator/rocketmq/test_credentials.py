"""RocketMQ 5 signatures checked against the auth file (coordinator/rocketmq/credentials.py),
signed by the official client's own Signature."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rocketmq.grpc_protocol import Code
from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.util import Signature

from coordinator.core.config import load_config
from coordinator.core.errors import ConfigurationError
from coordinator.rest.auth import OPEN_MODE, load_token_file, sha256_hex
from coordinator.rocketmq.codes import RefusedError
from coordinator.rocketmq.credentials import Credentials as Checked
from coordinator.rocketmq.credentials import require_safe_listen
from tests.coordinator.rocketmq.endpoint_process import tls_settings

TOKEN = "orders-app-token-0123456789abcdef"


def signed(access_key: str, secret_key: str) -> list[tuple[str, str]]:
    configuration = ClientConfiguration("127.0.0.1:8081", Credentials(access_key, secret_key))
    return list(Signature.metadata(configuration, "host@1@0@abc"))


@pytest.fixture
def checked(tmp_path: Path) -> Checked:
    path = tmp_path / "auth.toml"
    path.write_text(
        f'[[token]]\nname = "orders-app"\ngroup = "orders"\nsha256 = "{sha256_hex(TOKEN)}"\n'
        f'[[token]]\nadmin = true\nname = "ops"\nsha256 = "{sha256_hex(TOKEN + "x")}"\n'
    )
    path.chmod(0o600)
    return Checked(load_token_file(path))


def unauthorized(checked: Checked, metadata: list[tuple[str, str]]) -> str:
    with pytest.raises(RefusedError) as caught:
        checked.authenticate(metadata)
    assert caught.value.code == Code.UNAUTHORIZED
    return caught.value.message


def test_the_official_client_s_signature_names_its_token_s_rights(checked: Checked) -> None:
    who = checked.authenticate(signed("orders-app", sha256_hex(TOKEN)))
    assert (who.group, who.admin, who.name) == ("orders", False, "orders-app")
    assert checked.authenticate(signed("ops", sha256_hex(TOKEN + "x"))).admin


def test_a_signature_in_uppercase_hex_is_the_same_signature(checked: Checked) -> None:
    """RocketMQ's Java client writes the HMAC in uppercase hex (commons-codec's
    encodeHexString(bytes, false)), the Python client in lowercase: both are one signature
    (found by tests/coordinator/rocketmq/test_python_client.py's Java client run)."""
    metadata = [
        (key, re.sub(r"Signature=(\w+)", lambda m: f"Signature={m.group(1).upper()}", value))
        if key == "authorization"
        else (key, value)
        for key, value in signed("orders-app", sha256_hex(TOKEN))
    ]
    assert any("Signature=" in v and v != v.lower() for _, v in metadata)
    assert checked.authenticate(metadata).name == "orders-app"


def test_a_wrong_or_missing_signature_is_unauthorized(checked: Checked) -> None:
    assert "not valid" in unauthorized(checked, signed("orders-app", sha256_hex("other")))
    # The right secret under another token's name is not that token.
    assert "not valid" in unauthorized(checked, signed("ops", sha256_hex(TOKEN)))
    assert "not valid" in unauthorized(checked, signed("nobody", sha256_hex(TOKEN)))
    assert "sign the call" in unauthorized(checked, [("x-mq-client-id", "c")])
    metadata = [
        (key, value.replace("MQv2-HMAC-SHA1", "Basic") if key == "authorization" else value)
        for key, value in signed("orders-app", sha256_hex(TOKEN))
    ]
    assert "MQv2-HMAC-SHA1" in unauthorized(checked, metadata)


def test_open_mode_trusts_every_caller_on_loopback_only() -> None:
    assert Checked(None).authenticate([]) is OPEN_MODE
    require_safe_listen(Checked(None), load_config())
    with pytest.raises(ConfigurationError, match="open mode"):
        require_safe_listen(Checked(None), load_config(overrides={"grpc.host": "0.0.0.0"}))


def test_beyond_loopback_the_endpoint_serves_tls(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"plain gRPC.*grpc\.tls_certfile"):
        require_safe_listen(Checked([]), load_config(overrides={"grpc.host": "0.0.0.0"}))
    tls = tls_settings(tmp_path / "tls")
    require_safe_listen(Checked([]), load_config(overrides={"grpc.host": "0.0.0.0", **tls}))
    with pytest.raises(ConfigurationError, match="open mode"):
        require_safe_listen(Checked(None), load_config(overrides={"grpc.host": "0.0.0.0", **tls}))


def test_tls_settings_that_cannot_work_are_refused(tmp_path: Path) -> None:
    tls = tls_settings(tmp_path / "tls")
    with pytest.raises(ConfigurationError, match="go together"):
        load_config(overrides={"grpc.tls_certfile": tls["grpc.tls_certfile"]})
    with pytest.raises(ConfigurationError, match="not a readable file"):
        load_config(overrides={**tls, "grpc.tls_keyfile": str(tmp_path / "absent.key")})
    Path(tls["grpc.tls_keyfile"]).chmod(0o644)
    with pytest.raises(ConfigurationError, match=r"grpc\.tls_keyfile .*chmod 600"):
        load_config(overrides=tls)
