"""A single-node KRaft Kafka broker on 127.0.0.1, run from the install step's jars.

Lifecycle, as `bin/kafka-server-start.sh` would do it, without the shell scripts:

1. write `server.properties` and `log4j2.properties` into the data folder;
2. format the storage once (`kafka.tools.StorageTool format`; skipped when
   `meta.properties` already exists, so a restart keeps every topic and offset);
3. start `kafka.Kafka server.properties` in its own process group, output to `logs/`;
4. ready only when an admin client gets cluster metadata back (an open port is not
   enough: the controller may still be electing itself);
5. stop with SIGTERM (a controlled shutdown flushes the logs), then SIGKILL after
   `stop_timeout`.

Data folder layout::

    <data_dir>/server.properties, log4j2.properties
    <data_dir>/broker.json       ports, cluster id and pid of the running broker
    <data_dir>/kraft/            log.dirs: the metadata log and every partition
    <data_dir>/logs/server.log   the broker's log4j2 log (rolled)
    <data_dir>/logs/stdout.log   the JVM's own output (warnings, crashes)

With `BrokerSettings.auth` (coordinator/runtime/local_stack/broker_auth.py) the broker is secured:
SASL SCRAM principals, the StandardAuthorizer, credentials added when formatting; the
caller then creates the ACLs (`broker_auth.apply_auth`). Without it, it is open on loopback.

Ports default to the ones used last time (so clients configured for a restarted stack
keep working) and otherwise to free ones.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any

from kafka.admin import KafkaAdminClient

from coordinator.core.errors import BrokerError
from coordinator.core.kafka_security import KafkaSecurity
from coordinator.core.secret_files import write_private
from coordinator.kafka_clients.options import kafka_python_options
from coordinator.runtime import class_archives
from coordinator.runtime.artifacts import jars
from coordinator.runtime.local_stack.broker_auth import BrokerAuth
from coordinator.runtime.local_stack.ports import free_port, port_is_free

log = logging.getLogger(__name__)

#: JVM flags of Kafka's own kafka-run-class.sh (G1 with short pauses).
KAFKA_JVM_FLAGS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-Djava.awt.headless=true",
)


@dataclass(frozen=True)
class BrokerSettings:
    """Where and how to run the local broker; validated when constructed."""

    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0  # 0: the port used last time if it is free, else any free port
    controller_port: int = 0
    # 1 GiB heap, Kafka's own default: plenty for one node, and leaves a 24 GiB box to Spark.
    heap: str = "1g"
    default_partitions: int = 4
    internal_partitions: int = 4
    startup_timeout: float = 90.0
    stop_timeout: float = 30.0
    jar_cache_dir: Path | None = None
    # Ask the kernel to SIGTERM the broker if the process that started it dies (even by
    # kill -9), so a crashed `txcoord up` or test run never leaves a broker behind.
    die_with_parent: bool = True
    extra_properties: dict[str, str] = field(default_factory=dict)
    # SASL principals and ACLs (None: open on loopback, as `txcoord up` without auth file).
    auth: BrokerAuth | None = None
    # The broker's JVMs write the classes they loaded to this archive when they exit
    # (coordinator/record_classes.py) instead of starting from the archive.
    record_classes: Path | None = None
    # The cluster this node formats its storage for (None: its own, a new one the first
    # time); every node of a multi-node cluster (kafka_cluster.py) is given the same.
    cluster_id: str | None = None

    def __post_init__(self) -> None:
        if self.host not in ("127.0.0.1", "localhost", "::1"):
            raise ValueError(f"host must be a loopback address, not {self.host!r}")
        for name in ("port", "controller_port"):
            value = getattr(self, name)
            if not 0 <= value <= 65535:
                raise ValueError(f"{name} must be between 0 and 65535, not {value}")
        if self.port and self.port == self.controller_port:
            raise ValueError("port and controller_port must differ")
        if self.startup_timeout <= 0 or self.stop_timeout <= 0:
            raise ValueError("startup_timeout and stop_timeout must be positive")


@dataclass(frozen=True)
class BrokerInfo:
    """What `broker.json` records about a broker started in a data folder."""

    port: int
    controller_port: int
    cluster_id: str
    pid: int | None = None

    @property
    def bootstrap_servers(self) -> str:
        """Return the `host:port` clients connect to."""
        return f"127.0.0.1:{self.port}"


def new_cluster_id() -> str:
    """Return a random cluster id in Kafka's format (22 url-safe base64 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def read_info(data_dir: Path) -> BrokerInfo | None:
    """Return the broker record of `data_dir`, or None when there is none."""
    path = data_dir / "broker.json"
    try:
        raw = json.loads(path.read_text())
        return BrokerInfo(
            port=int(raw["port"]),
            controller_port=int(raw["controller_port"]),
            cluster_id=str(raw["cluster_id"]),
            pid=int(raw["pid"]) if raw.get("pid") else None,
        )
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise BrokerError(f"{path} is unreadable ({exc}); delete it to start afresh") from exc


def _write_info(data_dir: Path, info: BrokerInfo) -> None:
    tmp = data_dir / "broker.json.tmp"
    tmp.write_text(json.dumps(info.__dict__, indent=2) + "\n")
    tmp.replace(data_dir / "broker.json")


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((host, port)) == 0


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"({path} does not exist)"


def pid_is_our_broker(pid: int, data_dir: Path) -> bool:
    """Return True if `pid` is a live kafka.Kafka process serving `data_dir` (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    config = str((data_dir / "server.properties").resolve()).encode()
    return b"kafka.Kafka" in cmdline and config in cmdline


class KafkaBroker:
    """A local single-node KRaft broker; use as a context manager or call start/stop."""

    def __init__(self, settings: BrokerSettings) -> None:
        self.settings = replace(settings, data_dir=settings.data_dir.resolve())
        self._process: subprocess.Popen[bytes] | None = None
        self._info: BrokerInfo | None = None

    # -- paths -------------------------------------------------------------------------
    @property
    def data_dir(self) -> Path:
        """Return the folder holding configuration, storage and logs."""
        return self.settings.data_dir

    @property
    def log_dir(self) -> Path:
        """Return the folder with `server.log` and `stdout.log`."""
        return self.data_dir / "logs"

    @property
    def storage_dir(self) -> Path:
        """Return the broker's `log.dirs` (metadata log and partitions)."""
        return self.data_dir / "kraft"

    @property
    def bootstrap_servers(self) -> str:
        """Return `host:port` for clients; only valid once started."""
        if self._info is None:
            raise BrokerError("the broker has not been started")
        return f"{self.settings.host}:{self._info.port}"

    @property
    def client_security(self) -> KafkaSecurity:
        """Return how the engine's clients connect: as the engine principal, or plaintext."""
        auth = self.settings.auth
        return auth.engine_security if auth else KafkaSecurity()

    @property
    def info(self) -> BrokerInfo:
        """Return ports, cluster id and pid of the started broker."""
        if self._info is None:
            raise BrokerError("the broker has not been started")
        return self._info

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> KafkaBroker:
        """Format the storage if needed, start the broker and wait until it serves metadata."""
        if self.is_running():
            return self
        self.launch()
        return self.wait_ready()

    def launch(self) -> KafkaBroker:
        """Format the storage if needed and start the broker process; do not wait for it.

        The nodes of a cluster are launched together, then waited for: a node serves
        metadata only once a majority of the controllers has elected a leader.
        """
        if self.is_running():
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(exist_ok=True)
        previous = read_info(self.data_dir)
        if previous and previous.pid and pid_is_our_broker(previous.pid, self.data_dir):
            raise BrokerError(
                f"a broker (pid {previous.pid}) is already running on {self.data_dir}; "
                f"stop it first (txcoord broker stop --data-dir {self.data_dir})"
            )
        info = self._choose_ports(previous)
        classpath = os.pathsep.join(str(j) for j in jars("kafka", self.settings.jar_cache_dir))
        self._write_config(info)
        self._format_storage(classpath, info.cluster_id)
        self._spawn(classpath)
        assert self._process is not None
        self._info = replace(info, pid=self._process.pid)
        _write_info(self.data_dir, self._info)
        return self

    def wait_ready(self) -> KafkaBroker:
        """Wait until the launched broker serves metadata; stop it if it does not in time."""
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        log.info("kafka broker ready at %s (pid %s)", self.bootstrap_servers, self.info.pid)
        return self

    def stop(self) -> None:
        """Stop the broker: SIGTERM, then SIGKILL after `stop_timeout` seconds."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(self.settings.stop_timeout)
            except subprocess.TimeoutExpired:
                log.warning(
                    "kafka broker ignored SIGTERM for %.0f s; killing it",
                    self.settings.stop_timeout,
                )
                process.kill()
                process.wait()
        if self._info is not None:
            self._info = replace(self._info, pid=None)
            _write_info(self.data_dir, self._info)

    def kill(self) -> None:
        """Kill the broker with SIGKILL, as a crash would (start() recovers its storage)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()

    def is_running(self) -> bool:
        """Return True while the broker process started here is alive."""
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    # -- steps -------------------------------------------------------------------------
    def _choose_ports(self, previous: BrokerInfo | None) -> BrokerInfo:
        host = self.settings.host

        def pick(wanted: int, last: int | None, taken: int | None = None) -> int:
            if wanted:
                if not port_is_free(wanted, host):
                    raise BrokerError(f"port {wanted} on {host} is already in use")
                return wanted
            if last and last != taken and port_is_free(last, host):
                return last
            port = free_port(host)
            while port == taken:
                port = free_port(host)
            return port

        port = pick(self.settings.port, previous.port if previous else None)
        controller_port = pick(
            self.settings.controller_port, previous.controller_port if previous else None, port
        )
        cluster_id = self.settings.cluster_id or (
            previous.cluster_id if previous else new_cluster_id()
        )
        return BrokerInfo(port=port, controller_port=controller_port, cluster_id=cluster_id)

    def _write_config(self, info: BrokerInfo) -> None:
        template = resources.files(__package__).joinpath("server.properties.in").read_text()
        properties = template.format(
            host=self.settings.host,
            port=info.port,
            controller_port=info.controller_port,
            log_dirs=self.storage_dir,
            default_partitions=self.settings.default_partitions,
            internal_partitions=self.settings.internal_partitions,
        )
        if self.settings.extra_properties:
            properties += "\n# extra properties\n" + "".join(
                f"{key}={value}\n" for key, value in sorted(self.settings.extra_properties.items())
            )
        auth = self.settings.auth
        if auth is not None:
            # Later keys win in a properties file: these replace the open listeners above.
            secured = auth.server_properties(self.settings.host, info.port, info.controller_port)
            properties += "\n# secured (auth file): replaces the open listeners above\n" + "".join(
                f"{key}={value}\n" for key, value in secured.items()
            )
        path = self.data_dir / "server.properties"
        if auth is not None:  # the engine's password is in it: private before it is written
            write_private(path, properties)
        else:
            path.write_text(properties)
        log4j = resources.files(__package__).joinpath("log4j2.properties").read_text()
        (self.data_dir / "log4j2.properties").write_text(log4j)

    def _java(
        self, classpath: str, heap: str | None = None, short_lived: bool = False
    ) -> list[str]:
        """Return the java command line up to the main class.

        `short_lived`: a tool that runs for a second (storage format) compiles with C1 only,
        as the JIT's optimising compiler would only cost it time. The JVM starts from the
        install step's class archive when there is one (coordinator/runtime/class_archives.py).
        `KAFKA_OPTS` adds JVM options, as it does for Kafka's own kafka-run-class.sh.
        """
        java = shutil.which("java")
        if java is None:
            raise BrokerError("java is not on PATH; the broker needs Java 17 or newer")
        command = [java]
        if heap:
            command += [f"-Xms{heap}", f"-Xmx{heap}"]
        if short_lived:
            command.append("-XX:TieredStopAtLevel=1")
        command += [
            *KAFKA_JVM_FLAGS,
            *class_archives.options(
                class_archives.KAFKA_BROKER,
                self.settings.jar_cache_dir,
                self.settings.record_classes,
            ),
            *shlex.split(os.environ.get("KAFKA_OPTS", "")),
            f"-Dkafka.logs.dir={self.log_dir}",
            f"-Dlog4j2.configurationFile={self.data_dir / 'log4j2.properties'}",
            "-cp",
            classpath,
        ]
        return command

    def _format_storage(self, classpath: str, cluster_id: str) -> None:
        if (self.storage_dir / "meta.properties").exists():
            return
        command = [
            *self._java(classpath, heap="256m", short_lived=True),
            "kafka.tools.StorageTool",
            "format",
            # One token: an id may begin with "-", which a separate argument would turn
            # into an option (1 start in 64 failed that way).
            f"--cluster-id={cluster_id}",
            "--config",
            str(self.data_dir / "server.properties"),
            "--ignore-formatted",
        ]
        argfile = self.data_dir / "format.args"
        if self.settings.auth is not None:
            # Credentials never on a command line (/proc/*/cmdline is world-readable): the
            # java launcher reads the main class and its arguments from a private @argfile.
            start = command.index("kafka.tools.StorageTool")
            arguments = [*command[start:], *self.settings.auth.scram_arguments()]
            write_private(argfile, "".join(f'"{a}"\n' for a in arguments))
            command = [*command[:start], f"@{argfile}"]
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, timeout=180, check=False
            )
        finally:
            argfile.unlink(missing_ok=True)
        if result.returncode != 0:
            raise BrokerError(
                f"formatting {self.storage_dir} failed (exit {result.returncode}):\n"
                f"{result.stdout}{result.stderr}"
            )

    def _spawn(self, classpath: str) -> None:
        command = [
            *self._java(classpath, heap=self.settings.heap),
            "kafka.Kafka",
            str(self.data_dir / "server.properties"),
        ]
        setpriv = shutil.which("setpriv")
        if self.settings.die_with_parent and setpriv:
            command = [setpriv, "--pdeathsig", "TERM", *command]
        with (self.log_dir / "stdout.log").open("ab") as out:
            # Own session: a Ctrl-C in the terminal reaches txcoord, which then stops the
            # broker in order, instead of reaching the broker and everything at once.
            self._process = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.settings.startup_timeout
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise BrokerError(
                    f"kafka broker exited with code {self._process.returncode} while starting.\n"
                    f"--- {self.log_dir / 'stdout.log'} ---\n{_tail(self.log_dir / 'stdout.log')}\n"
                    f"--- {self.log_dir / 'server.log'} ---\n{_tail(self.log_dir / 'server.log')}"
                )
            if not _port_open(self.settings.host, self.info.port):
                time.sleep(0.25)  # not listening yet: no client, no connection-refused noise
                continue
            try:
                admin = KafkaAdminClient(
                    bootstrap_servers=self.bootstrap_servers,
                    client_id="txcoord-readiness",
                    request_timeout_ms=5000,
                    **kafka_python_options(self.client_security),
                )
                try:
                    cluster: Any = admin.describe_cluster()
                finally:
                    admin.close()
                if cluster.get("brokers"):
                    return
            except Exception as exc:  # any client error means: not ready yet
                last_error = exc
            time.sleep(0.25)
        raise BrokerError(
            f"kafka broker at {self.bootstrap_servers} did not serve metadata within "
            f"{self.settings.startup_timeout:.0f} s (last error: {last_error}); "
            f"see {self.log_dir / 'server.log'}"
        )


def stop_by_pid_file(data_dir: Path, timeout: float = 30.0) -> bool:
    """Stop the broker recorded in `data_dir/broker.json` by another process.

    Return True if a broker was running and has stopped.
    """
    data_dir = data_dir.resolve()
    info = read_info(data_dir)
    if info is None or info.pid is None or not pid_is_our_broker(info.pid, data_dir):
        return False
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and pid_is_our_broker(info.pid, data_dir):
        time.sleep(0.2)
    if pid_is_our_broker(info.pid, data_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, signal.SIGKILL)
    _write_info(data_dir, replace(info, pid=None))
    return True
