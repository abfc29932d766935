"""The `txcoord` program leaves with its command's exit code and all of its output.

It ends with `os._exit` (coordinator/cli.py `run`), so these run it as a real process.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def txcoord(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_success_usage_errors_and_command_errors_keep_their_exit_codes(tmp_path: Path) -> None:
    helped = txcoord("transactions", "--help")
    assert helped.returncode == 0, helped.stderr
    # The whole help, to its last command: nothing was lost to the hard exit.
    assert "describe" in helped.stdout and "resume" in helped.stdout
    unknown = txcoord("nosuch")
    assert unknown.returncode == 2 and "No such command 'nosuch'" in unknown.stderr
    missing = txcoord(
        "transactions",
        "describe",
        "tx-1",
        "--warehouse",
        str(tmp_path),
        "--bootstrap-servers",
        "127.0.0.1:1",
    )
    assert missing.returncode == 1, missing.stderr
    assert f"unknown transaction 'tx-1' in {tmp_path}" in missing.stderr
