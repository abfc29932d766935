"""`txcoord broker start|status|stop` drives a background broker across processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from coordinator.runtime.local_stack.kafka_broker import pid_is_our_broker, read_info

pytestmark = pytest.mark.kafka


def txcoord(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "coordinator", *args],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


@pytest.mark.usefixtures("kafka_broker")  # Kafka can start here: a command that cannot is failing
def test_start_status_stop(tmp_path: Path) -> None:
    data_dir = str(tmp_path / "kafka")
    started = txcoord("broker", "start", "--data-dir", data_dir)
    assert started.returncode == 0, started.stderr + started.stdout
    try:
        assert "kafka broker ready at 127.0.0.1:" in started.stdout
        info = read_info(Path(data_dir).resolve())
        assert info is not None and info.pid is not None
        assert pid_is_our_broker(info.pid, Path(data_dir).resolve())

        status = txcoord("broker", "status", "--data-dir", data_dir)
        assert status.returncode == 0
        assert f"running at 127.0.0.1:{info.port}" in status.stdout
    finally:
        stopped = txcoord("broker", "stop", "--data-dir", data_dir)
    assert stopped.returncode == 0, stopped.stderr
    assert "kafka broker stopped" in stopped.stdout
    assert not pid_is_our_broker(info.pid, Path(data_dir).resolve())

    status = txcoord("broker", "status", "--data-dir", data_dir)
    assert status.returncode == 1
    assert "no broker is running" in status.stderr
