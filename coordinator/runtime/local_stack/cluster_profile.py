"""`txcoord up --cluster`: the production shape of a deployment, every part a process on loopback.

- an S3 API (moto's server, s3_server.py) holding the warehouse and the stream checkpoints
  (`s3a://txcoord/...`), reached by Spark's s3a and by delta-rs through the AWS_* variables;
- three KRaft brokers (kafka_cluster.py): topics with three replicas, `min.insync.replicas` 2;
- a Spark standalone master with two workers (spark_cluster.py);
- the coordinator application submitted to that master with `deploy/submit-coordinator`,
  one executor per worker;
- the REST ingress (`python -m coordinator.rest`) on its own, in front of the brokers.

Each part is started and waited for in that order and stopped in the reverse one; a part
that exits on its own is a problem the caller is told about (`problems`). The S3 server keeps
its objects in memory, so the profile starts fresh every time (its folder is emptied): it is a
place to see the parts work together and to break them, not to keep data.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from coordinator.core.config import Config, load_config
from coordinator.core.errors import StackError
from coordinator.runtime.artifacts import PROJECT_ROOT
from coordinator.runtime.local_stack.kafka_cluster import ClusterSettings, KafkaCluster
from coordinator.runtime.local_stack.s3_server import S3Server
from coordinator.runtime.local_stack.spark_cluster import StandaloneCluster

#: The bucket of the warehouse and the checkpoints.
BUCKET = "txcoord"
#: What the coordinator prints once its streams run (coordinator/app.py).
RUNNING = "txcoord coordinator running"
#: Seconds the coordinator may take to start by default: a hang signal. Its start there takes
#: ~50 s on an idle 2-core machine, ~60 s beside a one-core CPU hog (the executors' JVMs cold,
#: tests/gate_budget.py prints the gate's); a slower host raises it (`up --start-timeout`).
START_BOUND = 240.0
#: How to give a slower host longer: said when the bound is passed.
START_HINT = "a slower host can give it longer: `txcoord up --cluster --start-timeout SECONDS`"
#: Seconds each process may take to stop on SIGTERM before it is killed.
STOP_BOUND = 60.0


@dataclass(frozen=True)
class ProfileSettings:
    """Where the profile keeps its parts' folders and logs, and their sizes."""

    state_dir: Path = Path("var/cluster")
    workers: int = 2
    worker_memory: str = "1536m"
    executor_memory: str = "1g"
    driver_memory: str = "2g"
    start_bound: float = START_BOUND


class ClusterProfile:
    """The parts of the cluster profile: `start` yields a line per part up; `stop` stops all."""

    def __init__(
        self, settings: ProfileSettings, config_file: Path | None, overrides: Mapping[str, str]
    ) -> None:
        self.settings, self.config_file, self.overrides = settings, config_file, overrides
        self.s3: S3Server | None = None
        self.kafka: KafkaCluster | None = None
        self.spark: StandaloneCluster | None = None
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.config: Config | None = None

    @property
    def logs(self) -> Path:
        """Return the folder of the coordinator's and the REST ingress's logs."""
        return self.settings.state_dir / "logs"

    def start(self) -> Iterator[str]:
        """Start every part in order, yielding a line as each is up; StackError if one fails."""
        state = self.settings.state_dir
        shutil.rmtree(state, ignore_errors=True)  # the S3 server starts empty: so does the rest
        self.logs.mkdir(parents=True)
        self.s3 = S3Server(state)
        self.s3.bucket(BUCKET)
        # Every process started from here on (workers, executors, the driver, the REST
        # ingress) finds the store through the same variables a real deployment would set.
        os.environ.update(self.s3.environment())
        yield f"s3 api at {self.s3.endpoint}, bucket {BUCKET} (moto, in memory)"
        self.kafka = KafkaCluster(ClusterSettings(state / "kafka"))
        self.kafka.start()
        yield f"kafka: three brokers at {self.kafka.bootstrap_servers}"
        self.spark = StandaloneCluster(
            state / "spark",
            cores=1,
            memory=self.settings.worker_memory,
            workers=self.settings.workers,
        )
        self.spark.start()
        yield f"spark: master {self.spark.master_url}, {self.settings.workers} workers"
        settings = self._settings()
        self.config = load_config(self.config_file, os.environ, settings)
        self._start_coordinator(settings)
        yield f"coordinator submitted to {self.spark.master_url}: running"
        self._start_rest(settings)
        yield f"rest ingress at {self.rest_url}"

    @property
    def rest_url(self) -> str:
        """Return the REST ingress's base URL."""
        assert self.config is not None
        return f"http://{self.config.rest.host}:{self.config.rest.port}"

    def _settings(self) -> dict[str, str]:
        """Return the configuration overrides: the caller's, then the profile's places."""
        assert self.kafka is not None
        return {
            **self.overrides,
            "warehouse": f"s3a://{BUCKET}/warehouse",
            "streams.checkpoint_dir": f"s3a://{BUCKET}/checkpoints",
            "kafka.bootstrap_servers": self.kafka.bootstrap_servers,
            "kafka.replication_factor": "3",
            "kafka.min_insync_replicas": "2",
        }

    def _arguments(self, settings: Mapping[str, str]) -> list[str]:
        config = ["--config", str(self.config_file)] if self.config_file else []
        return [
            *config,
            *[a for key, value in settings.items() for a in ("--set", f"{key}={value}")],
        ]

    def _spawn(self, name: str, command: list[str]) -> subprocess.Popen[bytes]:
        with (self.logs / f"{name}.log").open("wb") as log:
            process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.processes[name] = process
        return process

    def _start_coordinator(self, settings: Mapping[str, str]) -> None:
        assert self.spark is not None
        submit = PROJECT_ROOT / "deploy" / "submit-coordinator"
        if not submit.is_file():
            raise StackError(f"the cluster profile submits with {submit}: run it from a checkout")
        executors = {
            "spark.executor.memory": self.settings.executor_memory,
            "spark.executor.cores": "1",
            "spark.cores.max": str(self.settings.workers),
        }
        self._spawn("coordinator", [
            str(submit), "--master", self.spark.master_url,
            "--driver-memory", self.settings.driver_memory,
            *[a for key, value in executors.items() for a in ("--conf", f"{key}={value}")],
            "--", *self._arguments(settings),
        ])  # fmt: skip
        self._wait_for_log(
            "coordinator",
            RUNNING,
            self.settings.start_bound,
            hint=START_HINT,
        )

    def _start_rest(self, settings: Mapping[str, str]) -> None:
        self._spawn("rest", [sys.executable, "-m", "coordinator.rest", *self._arguments(settings)])
        self._wait_for_log("rest", "Uvicorn running", 60)

    def _wait_for_log(self, name: str, text: str, bound: float, hint: str = "") -> None:
        """Wait until process `name` wrote `text` in its log; StackError if it exits first or
        has not written it within `bound` seconds (a hang signal: `hint` says how to raise it).
        """
        log, process = self.logs / f"{name}.log", self.processes[name]
        deadline = time.monotonic() + bound
        while text not in log.read_text(errors="replace"):
            if process.poll() is not None:
                raise StackError(f"the {name} exited; its log, {log}, ends:\n{tail(log)}")
            if time.monotonic() > deadline:
                raise StackError(
                    f"the {name} did not say {text!r} within its start bound of {bound:.0f} s"
                    f"{f' ({hint})' if hint else ''}; its log, {log}, ends:\n{tail(log)}"
                )
            time.sleep(0.5)

    def problems(self) -> list[str]:
        """Return a line for every part that exited on its own."""
        found = [
            f"the {name} exited with {process.returncode} (log: {self.logs / f'{name}.log'})"
            for name, process in self.processes.items()
            if process.poll() is not None
        ]
        if self.s3 is not None and self.s3.process.poll() is not None:
            found.append(f"the S3 server exited with {self.s3.process.returncode}")
        return found

    def stop(self) -> None:
        """Stop every part in the reverse order (SIGTERM, then SIGKILL after STOP_BOUND)."""
        for process in reversed(list(self.processes.values())):  # REST first, then the driver
            stop_process(process)
        if self.spark is not None:
            self.spark.__exit__(None, None, None)
        if self.kafka is not None:
            self.kafka.stop()
        if self.s3 is not None:
            self.s3.stop()


def python_driver_of(jvm_pid: int) -> int | None:
    """Return the pid of the Python driver that spark-submit's JVM started, if it runs."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if int(fields[1]) == jvm_pid and b"coordinator/app.py" in cmdline:
            return int(stat.parent.name)
    return None


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM `process`, SIGKILL its group if it has not stopped after STOP_BOUND.

    spark-submit's JVM runs the Python driver as its child: the SIGTERM goes to the driver,
    the coordinator's orderly stop (coordinator/app.py), and the JVM ends with it.
    """
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(python_driver_of(process.pid) or process.pid, signal.SIGTERM)
    try:
        process.wait(STOP_BOUND)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(STOP_BOUND)


def tail(log: Path, lines: int = 30) -> str:
    """Return the last `lines` lines of file `log`."""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
