"""The coordinator application under `deploy/submit-coordinator`, as a test drives it.

spark-submit's JVM runs the Python driver as its child. The process runs in a session of its
own, so `kill9` reaches the whole tree at once (JVM, Python driver, Python workers) the way
a machine crash would, and `terminate` sends SIGTERM to the Python driver, the graceful stop.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Mapping

from coordinator.runtime.artifacts import PROJECT_ROOT
from coordinator.runtime.local_stack.cluster_profile import python_driver_of


class AppProcess:
    """One run of the coordinator application; its output is kept line by line."""

    def __init__(
        self,
        settings: dict[str, str],
        *app_args: str,
        master: str = "local[2]",
        spark_conf: Mapping[str, str] | None = None,
        command: list[str] | None = None,
    ) -> None:
        """`command`, if given, runs instead of the application (its output kept the same way)."""
        command = command or [
            str(PROJECT_ROOT / "deploy" / "submit-coordinator"),
            "--master", master, "--driver-memory", "1g",
            *[arg for key, value in (spark_conf or {}).items()
              for arg in ("--conf", f"{key}={value}")],
            "--",
            *[arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")],
            *app_args,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.output: list[str] = []
        self._lines: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)

    def wait_for_line(self, text: str, timeout: float) -> bool:
        """Return True once a line containing `text` was printed; False on exit or timeout."""
        return self.wait_for_any([text], timeout) is not None

    def wait_for_any(self, texts: list[str], timeout: float) -> str | None:
        """Return the first of `texts` that a new line contains; None on exit or timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.output.append(self._lines.get(timeout=1))
            except queue.Empty:
                if self.process.poll() is not None and self._lines.empty():
                    return None
                continue
            for text in texts:
                if text in self.output[-1]:
                    return text
        return None

    def lines(self) -> list[str]:
        """Return every line of output printed so far."""
        while not self._lines.empty():
            self.output.append(self._lines.get())
        return self.output

    def tail(self, lines: int = 40) -> str:
        """Return the last lines of output seen so far."""
        return "".join(self.lines()[-lines:])

    def kill9(self) -> None:
        """SIGKILL the whole process tree at once."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(60)
        self._reader.join(10)

    def terminate(self, timeout: float = 120) -> int:
        """Stop gracefully (SIGTERM to the Python driver); return the exit code."""
        driver = python_driver_of(self.process.pid)
        if driver is not None:
            os.kill(driver, signal.SIGTERM)
        elif self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        code = self.process.wait(timeout)
        self._reader.join(10)
        return code
