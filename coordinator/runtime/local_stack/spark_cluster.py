"""A Spark standalone cluster (one master, one or more workers) on 127.0.0.1: the cluster
profile's (`txcoord up --cluster`), and the one tests kill workers of.

Both daemons run from pyspark's own distribution (`bin/spark-class`, SPARK_HOME = the pyspark
package), each in a process group of its own: the worker's executors and their Python
workers are its children, so killing the worker's group at the end takes them too. The
master's JSON status page (`/json/`) says which workers registered and which applications
ran; the worker's folder keeps each executor's log (`app-…/<executor>/stderr`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import pyspark

from coordinator.runtime.local_stack.ports import free_port

SPARK_HOME = Path(pyspark.__file__).parent
HOST = "127.0.0.1"


class ClusterError(RuntimeError):
    """The master or the worker could not start."""


class StandaloneCluster:
    """One master and `workers` workers (`cores`, `memory` each): `start` (or entering),
    killed on exit. A worker can be killed alone (SIGKILL to it and its executors).

    On an exception inside the `with` block the daemons' and the executors' logs are printed
    (pytest shows them with the failure).
    """

    def __init__(
        self, work_dir: Path, cores: int = 2, memory: str = "2g", workers: int = 1
    ) -> None:
        self.work_dir, self.cores, self.memory, self.workers = work_dir, cores, memory, workers
        self.port, self.webui_port = free_port(), free_port()
        self.master_url = f"spark://{HOST}:{self.port}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}

    def start(self) -> StandaloneCluster:
        """Start the master, then the worker; return once the worker registered.

        Raises ClusterError (after printing the logs) when either cannot start.
        """
        try:
            self._start()
        except Exception as exc:
            self._stop(print_logs=True)
            raise ClusterError(f"{exc} (logs in {self.work_dir})") from exc
        return self

    def __enter__(self) -> StandaloneCluster:
        return self if self.processes else self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop(print_logs=error is not None)

    def _start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._spawn(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            HOST,
            "--port",
            str(self.port),
            "--webui-port",
            str(self.webui_port),
        )
        self._wait_for(lambda status: status.get("status") == "ALIVE", "the master")
        for n in range(1, self.workers + 1):
            self.start_worker(n)

    def worker_name(self, n: int) -> str:
        """Return the name of worker `n` (1-based): its log file and folder."""
        return "worker" if self.workers == 1 else f"worker-{n}"

    def start_worker(self, n: int) -> None:
        """Start worker `n` (1-based) and wait until the master lists it."""
        alive = sum(
            1 for name, p in self.processes.items() if name != "master" and p.poll() is None
        )
        name = self.worker_name(n)
        self._spawn(
            name,
            "org.apache.spark.deploy.worker.Worker",
            self.master_url,
            "--host",
            HOST,
            "--cores",
            str(self.cores),
            "--memory",
            self.memory,
            "--webui-port",
            str(free_port()),
            "--work-dir",
            str(self.work_dir / name),
        )
        self._wait_for(
            lambda status: (
                sum(w["state"] == "ALIVE" for w in status.get("workers", [])) >= alive + 1
            ),
            f"{name} to register",
        )

    def kill_worker(self, n: int) -> None:
        """SIGKILL worker `n` and its executors (their process group), as a lost machine."""
        process = self.processes[self.worker_name(n)]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)

    def _spawn(self, name: str, main_class: str, *args: str) -> None:
        env = {
            **os.environ,
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_DAEMON_MEMORY": "512m",
        }
        with (self.work_dir / f"{name}.log").open("wb") as log:
            self.processes[name] = subprocess.Popen(
                [str(SPARK_HOME / "bin" / "spark-class"), main_class, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def _wait_for(
        self, ready: Callable[[dict[str, Any]], bool], what: str, timeout: float = 120
    ) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"the Spark {name} exited with {process.returncode}")
            with contextlib.suppress(OSError, ValueError):
                if ready(self.status()):
                    return
            time.sleep(1)
        raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")

    def status(self) -> dict[str, Any]:
        """Return the master's JSON status: workers, active and completed applications."""
        url = f"http://{HOST}:{self.webui_port}/json/"
        with urllib.request.urlopen(url, timeout=10) as response:
            status: dict[str, Any] = json.load(response)
        return status

    def applications(self, name: str) -> list[dict[str, Any]]:
        """Return the master's records of the applications called `name`, active or done."""
        status = self.status()
        apps = [*status.get("activeapps", []), *status.get("completedapps", [])]
        return [app for app in apps if app["name"] == name]

    def executor_logs(self) -> dict[str, str]:
        """Return each executor's stderr ("app-…/0" -> text) from the worker's folder."""
        logs = sorted(
            log
            for n in range(1, self.workers + 1)
            for log in (self.work_dir / self.worker_name(n)).glob("app-*/*/stderr")
        )
        return {
            str(p.parent.relative_to(p.parents[2])): p.read_text(errors="replace") for p in logs
        }

    def _stop(self, print_logs: bool) -> None:
        for process in reversed(self.processes.values()):  # the worker (and executors) first
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes.values():
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(20)
        if print_logs:
            for name in self.processes:
                print(f"----- Spark {name} log -----")
                print(tail((self.work_dir / f"{name}.log").read_text(errors="replace")))
            for executor, text in self.executor_logs().items():
                print(f"----- executor {executor} stderr -----")
                print(tail(text))


def tail(text: str, lines: int = 60) -> str:
    """Return the last `lines` lines of `text`."""
    return "\n".join(text.splitlines()[-lines:])
