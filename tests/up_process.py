"""`txcoord up` as a subprocess, the way a terminal runs it: its own process group, output kept."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path


class Up:
    """`txcoord up` in its own process group, as a terminal would run it."""

    def __init__(
        self,
        state_dir: Path,
        warehouse: Path | None,  # None: the stack's own choice (the cluster profile's)
        port: int,
        *settings: str,
        options: tuple[str, ...] = (),
    ) -> None:
        command = [
            sys.executable, "-m", "coordinator", "up",
            "--state-dir", str(state_dir),
            *(["--warehouse", str(warehouse)] if warehouse is not None else []),
            "--port", str(port),
            "--driver-memory", "1g",
            "--set", "transaction_timeout=4s",
            # any free metrics port: another test's stack (the README's `make up`, verbatim,
            # on the default port) may be running beside this one
            "--set", "metrics.port=0",
            "--set", "grpc.port=0",  # and any free port of the RocketMQ endpoint, likewise
            *[arg for setting in settings for arg in ("--set", setting)],
            *options,
        ]  # fmt: skip
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def wait_for(self, pattern: str, timeout: float = 240) -> re.Match[str]:
        """Return the match of the first new line matching `pattern`; the stack must be up."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                if self.process.poll() is not None and self.lines.empty():
                    break
                continue
            self.output.append(line)
            if match := re.search(pattern, line):
                return match
        self.stop(signal.SIGKILL)
        raise AssertionError(
            f"`txcoord up` never printed {pattern!r} within {timeout:.0f} s "
            f"(exit code {self.process.returncode}):\n" + "".join(self.output[-40:])
        )

    def stop(self, signum: int, group: bool = True) -> int:
        """Send `signum` to the whole group (a terminal's Ctrl-C) or to txcoord only (kill)."""
        if self.process.poll() is None:
            if group:
                os.killpg(self.process.pid, signum)
            else:
                os.kill(self.process.pid, signum)
        code = self.process.wait(300)
        while not self.lines.empty():
            self.output.append(self.lines.get())
        return code

    def text(self) -> str:
        """Return everything printed so far (stdout and stderr)."""
        while not self.lines.empty():
            self.output.append(self.lines.get())
        return "".join(self.output)
