"""The local KRaft broker: settings, start, restart, stop, and failures that explain themselves."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from kafka import KafkaProducer

from coordinator.core.errors import BrokerError
from coordinator.kafka_clients.admin import ensure_topic
from coordinator.runtime.artifacts import jars
from coordinator.runtime.local_stack.kafka_broker import (
    BrokerSettings,
    KafkaBroker,
    free_port,
    new_cluster_id,
    pid_is_our_broker,
    read_info,
)
from tests.coordinator.rest.kafka_io import read_all
from tests.processes import pid_alive


# -- settings (pure) ---------------------------------------------------------------------
def test_only_loopback_hosts_are_accepted(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="loopback"):
        BrokerSettings(data_dir=tmp_path, host="0.0.0.0")


def test_ports_must_be_valid_and_distinct(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="between 0 and 65535"):
        BrokerSettings(data_dir=tmp_path, port=70000)
    with pytest.raises(ValueError, match="must differ"):
        BrokerSettings(data_dir=tmp_path, port=9092, controller_port=9092)


def test_cluster_ids_have_kafkas_format() -> None:
    ids = {new_cluster_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(len(i) == 22 and "=" not in i for i in ids)


def test_a_busy_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(BrokerError, match=f"port {port} .* in use"):
            KafkaBroker(BrokerSettings(data_dir=tmp_path, port=port)).start()


# -- the real broker -----------------------------------------------------------------------
@pytest.mark.kafka
@pytest.mark.usefixtures("kafka_broker")  # Kafka can start here
def test_restart_keeps_topics_records_and_port(tmp_path: Path) -> None:
    broker = KafkaBroker(BrokerSettings(data_dir=tmp_path / "kafka")).start()
    try:
        # KAFKA_OPTS reaches the broker's JVM, as with kafka-run-class.sh (tests/conftest.py
        # sets it for every test broker).
        assert broker.info.pid is not None
        cmdline = Path(f"/proc/{broker.info.pid}/cmdline").read_bytes().split(b"\0")
        assert os.environ["KAFKA_OPTS"] and all(
            option.encode() in cmdline for option in shlex.split(os.environ["KAFKA_OPTS"])
        ), cmdline
        first_port = broker.info.port
        ensure_topic(broker.bootstrap_servers, "kept", partitions=1)
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
        producer.send("kept", b"survives a restart").get(timeout=30)
        producer.close()
        assert (broker.log_dir / "server.log").stat().st_size > 0
    finally:
        broker.stop()
    assert read_info(broker.data_dir).pid is None  # type: ignore[union-attr]

    broker = KafkaBroker(BrokerSettings(data_dir=tmp_path / "kafka")).start()
    try:
        assert broker.info.port == first_port
        # Read up to the topic's end offset (a restarted broker's first fetch can take
        # longer than any silence a read would stop at).
        assert [r.value for r in read_all(broker.bootstrap_servers, "kept", timeout=60)] == [
            b"survives a restart"
        ]
    finally:
        broker.stop()


@pytest.mark.kafka
@pytest.mark.usefixtures("kafka_broker")  # Kafka can start here
def test_a_second_broker_on_the_same_storage_is_refused(tmp_path: Path) -> None:
    broker = KafkaBroker(BrokerSettings(data_dir=tmp_path)).start()
    try:
        with pytest.raises(BrokerError, match="already running"):
            KafkaBroker(BrokerSettings(data_dir=tmp_path)).start()
    finally:
        broker.stop()


@pytest.mark.kafka
@pytest.mark.usefixtures("kafka_broker")  # Kafka can start here
def test_stop_kills_a_broker_that_ignores_sigterm(tmp_path: Path) -> None:
    broker = KafkaBroker(BrokerSettings(data_dir=tmp_path, stop_timeout=2)).start()
    pid = broker.info.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # a stopped JVM cannot act on SIGTERM
    started = time.monotonic()
    broker.stop()
    # Killed after the 2 s asked: not after the default 30 s, nor never. Reaping a killed
    # JVM is quick, but a loaded machine gets the rest.
    assert time.monotonic() - started < BrokerSettings.stop_timeout - 5
    assert not pid_alive(pid)


BAD_PROPERTY = {"num.io.threads": "not-a-number"}


def test_a_storage_that_cannot_be_formatted_says_why(tmp_path: Path) -> None:
    broker = KafkaBroker(BrokerSettings(data_dir=tmp_path, extra_properties=BAD_PROPERTY))
    with pytest.raises(BrokerError, match=r"(?s)formatting .* failed .*num\.io\.threads"):
        broker.start()
    assert not broker.is_running()


@pytest.mark.kafka
@pytest.mark.usefixtures("kafka_broker")  # Kafka can start here
def test_a_broker_that_exits_while_starting_reports_its_log(tmp_path: Path) -> None:
    KafkaBroker(BrokerSettings(data_dir=tmp_path)).start().stop()  # formatted storage
    broker = KafkaBroker(BrokerSettings(data_dir=tmp_path, extra_properties=BAD_PROPERTY))
    with pytest.raises(BrokerError, match=r"(?s)exited with code .*stdout\.log.*num\.io\.threads"):
        broker.start()
    assert not broker.is_running()


@pytest.mark.kafka
@pytest.mark.usefixtures("kafka_broker")  # Kafka can start here
def test_broker_dies_with_the_process_that_started_it(tmp_path: Path) -> None:
    """kill -9 of the owner (txcoord up, a test run) must not leave a broker behind."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
        broker = KafkaBroker(BrokerSettings(data_dir=Path({str(tmp_path)!r}))).start()
        print(broker.info.pid, flush=True)
        time.sleep(600)
        """
    )
    owner = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        line = owner.stdout.readline() if owner.stdout else ""
        assert line.strip(), "the owner process did not start a broker"
        pid = int(line)
        assert pid_is_our_broker(pid, tmp_path)
        owner.kill()
        owner.wait()
        # The broker gets SIGTERM (pdeathsig) and stops in order: seconds, more when loaded.
        deadline = time.monotonic() + 90
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not pid_alive(pid)
    finally:
        owner.kill()
        owner.wait()
        if owner.stdout:
            owner.stdout.close()


def test_free_port_is_bindable() -> None:
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_a_cluster_id_that_begins_with_a_dash_formats(tmp_path: Path) -> None:
    # new_cluster_id() is url-safe base64: about 1 start in 64 draws an id beginning with "-".
    broker = KafkaBroker(BrokerSettings(tmp_path / "kafka"))
    broker.data_dir.mkdir(parents=True)
    broker.log_dir.mkdir()
    info = broker._choose_ports(None)
    broker._write_config(info)
    classpath = os.pathsep.join(str(j) for j in jars("kafka", broker.settings.jar_cache_dir))
    broker._format_storage(classpath, "-" + new_cluster_id()[1:])
    assert (broker.storage_dir / "meta.properties").exists()
