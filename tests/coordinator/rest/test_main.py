"""`python -m coordinator.rest`: a bad configuration or token file stops it with a clear line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parents[3]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coordinator.rest", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "rest.port=0"], "rest.port must be 1..65535"),
        (["--set", "rest.prot=1"], "did you mean 'rest.port'"),
        (["--set", "rest.auth_file=/nonexistent/tokens.toml"], "does not exist"),
        (["--config", "/nonexistent/txcoord.toml"], "does not exist"),
        (["--set", "rest.host=0.0.0.0"], "open mode (no rest.auth_file"),
    ],
)
def test_a_bad_start_exits_2_with_the_reason(args: list[str], message: str) -> None:
    finished = run(*args)
    assert finished.returncode == 2, finished.stderr
    assert "txcoord rest:" in finished.stderr
    assert message in finished.stderr
    assert "Traceback" not in finished.stderr


def test_the_environment_is_read_at_the_entry_point() -> None:
    import os  # noqa: PLC0415

    finished = run(env={**os.environ, "TXCOORD_REST__PORT": "99999"})
    assert finished.returncode == 2
    assert "rest.port must be 1..65535" in finished.stderr
