"""contract 7.1 under the RocketMQ endpoint (issue 62.4): the engine killed -9 mid-flow while
RocketMQ's official clients produce and consume, then restarted.

Real processes on loopback: the session's Kafka broker, the engine (`deploy/submit-coordinator`,
started and killed through tests/guarantees/app_runs.py), the endpoint (`python -m
coordinator.rocketmq`), the official Python client's transactional Producer and
SimpleConsumer, and the official Java client's (tests/coordinator/rocketmq/java_peer.py).
The Python producer keeps sending transactions of four kinds, by their key: committed and
rolled back by the application, and left open for its TransactionChecker to commit or roll
back at the check-back; its consumer keeps receiving and acking. Once the engine has decided
by op and by check-back (a commit of each kind received), it is killed with SIGKILL (its
whole process tree) while more are in flight. While it is down the Java producer sends all
its transactions (commit, rollback, open ones its checker commits, the UNKNOWN-then-COMMIT
one); then the engine starts again under the same traffic. Once every transaction has its
final state: every committed one is in its topic table once and acked by its consumer once
(nothing lost, nothing doubled), nothing rolled back is delivered, and the halves sent while
the engine was down were checked back at the live producers (Python and Java) after the
restart.

Measured: 64-72 s for the test on the 2-core machine beside other test workers (two engine
starts of 15-20 s each; 115-145 Python transactions, the Java client's 8).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rocketmq.grpc_protocol import TransactionResolution
from rocketmq.v5.consumer import SimpleConsumer
from rocketmq.v5.model import FilterExpression, Message
from rocketmq.v5.producer import Producer, TransactionChecker

from coordinator.core.config import Config, load_config
from coordinator.rest.auth import sha256_hex
from tests.app_process import AppProcess
from tests.conftest import settings_under
from tests.coordinator.rocketmq.endpoint_process import client_configuration, endpoint_process
from tests.coordinator.rocketmq.java_peer import JavaPeer
from tests.coordinator.rocketmq.test_python_client import rows_of, send_half
from tests.guarantees.app_runs import AppRuns
from tests.harness import wait_for

pytestmark = [
    pytest.mark.spark,
    pytest.mark.kafka,
    pytest.mark.long,
    # The client's own logging calls logger.warn.
    pytest.mark.filterwarnings("ignore:The 'warn' method is deprecated:DeprecationWarning"),
]

TOPIC = "Payments"
GROUP = "payments"
PRODUCER_TOKEN = "payments-app-token-0123456789abc"
CONSUMER_GROUP = "ledger"
CONSUMER_TOKEN = "ledger-reader-token-0123456789ab"
#: What each kind of transaction ends as, by its key's prefix: the application's own end,
#: or (open-*) the checker's answer at the check-back.
KINDS = {
    "commit": "COMMITTED",
    "rollback": "ROLLED_BACK",
    "open-commit": "COMMITTED",
    "open-rollback": "ROLLED_BACK",
}
#: Seconds between two transactions of the traffic (its pace, not a synchronisation).
PACE = 0.2
#: Seconds a received message stays invisible: a message whose ack was lost comes again
#: within the drain.
INVISIBLE = 15
#: RocketMQ's Java client (tests/coordinator/rocketmq/java_peer.py): its producer sends
#: JAVA_COUNT transactions while the engine is down (by index mod 4: commit, rollback, open
#: and committed at the check, open and UNKNOWN at the first check then COMMIT), its
#: SimpleConsumer receives them.
JAVA_TOPIC = "JavaPayments"
JAVA_GROUP = "java-payments"
JAVA_ACCESS_KEY = "java-app"
JAVA_TOKEN = "java-app-token-0123456789abcdef01"
JAVA_READER = "java-reader"
JAVA_READER_TOKEN = "java-reader-token-0123456789abcd"
JAVA_COUNT = 8
JAVA_COMMITTED = [f"jk-{i}" for i in range(JAVA_COUNT) if i % 4 != 1]
#: Bound on each wait for a positive marker (engine batches take seconds on a loaded host).
BOUND = 180


def kind_of(key: str) -> str:
    return key.rsplit("-", maxsplit=1)[0]


class KeyedChecker(TransactionChecker):  # type: ignore[misc]
    """Answers a check from the message's key (the application's record of its local
    transaction); remembers when each check came."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, float]] = []  # (key, monotonic time)
        self._lock = threading.Lock()

    def check(self, message: Message) -> Any:
        (key,) = message.keys
        with self._lock:
            self.asked.append((key, time.monotonic()))
        if KINDS.get(kind_of(key), "COMMITTED") == "COMMITTED":  # a marker: committed
            return TransactionResolution.COMMIT
        return TransactionResolution.ROLLBACK


class Traffic:
    """The producer's transactions, one kind after another, until stopped."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.sent: dict[str, tuple[str, float]] = {}  # transaction id -> (key, sent at)
        self.unsure: list[str] = []  # keys whose half's answer did not come
        self.end_errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="traffic", daemon=True)

    def _run(self) -> None:
        kinds = list(KINDS)
        for i in range(100_000):
            if self.stop.wait(PACE):
                return
            key = f"{kinds[i % len(kinds)]}-{i}"
            try:
                transaction_id, transaction = send_half(self.producer, key, TOPIC)
            except Exception as exc:  # not stored, or not known to be: checked if it was
                self.unsure.append(f"{key}: {exc!r}")
                continue
            self.sent[transaction_id] = (key, time.monotonic())
            try:
                if kind_of(key) == "commit":
                    transaction.commit()
                elif kind_of(key) == "rollback":
                    transaction.rollback()
            except Exception as exc:  # the check-back then ends it, by its key
                self.end_errors.append(f"{key}: {exc!r}")


class Receiver:
    """The SimpleConsumer's loop: every message received is acked; counts the acks that
    succeeded (a message whose ack failed may rightly come again)."""

    def __init__(self, consumer: SimpleConsumer) -> None:
        self.consumer = consumer
        self.acked: Counter[str] = Counter()  # message id -> successful acks
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="receiver", daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                messages = self.consumer.receive(16, INVISIBLE)
            except Exception as exc:
                self.errors.append(f"receive: {exc!r}")
                self.stop.wait(1)  # a refused receive is not retried at once
                continue
            for message in messages:
                try:
                    self.consumer.ack(message)
                except Exception as exc:
                    self.errors.append(f"ack {message.message_id}: {exc!r}")
                    continue
                self.acked[message.message_id] += 1


def write_auth_file(path: Path) -> Path:
    path.write_text(
        f'[[token]]\nname = "{GROUP}-app"\ngroup = "{GROUP}"\n'
        f'sha256 = "{sha256_hex(PRODUCER_TOKEN)}"\n\n'
        f'[[token]]\nname = "{CONSUMER_GROUP}"\nsha256 = "{sha256_hex(CONSUMER_TOKEN)}"\n'
        f'[[token.consume]]\ngroup = "{CONSUMER_GROUP}"\ntopics = ["{TOPIC}"]\n\n'
        f'[[token]]\nname = "{JAVA_ACCESS_KEY}"\ngroup = "{JAVA_GROUP}"\n'
        f'sha256 = "{sha256_hex(JAVA_TOKEN)}"\n\n'
        f'[[token]]\nname = "{JAVA_READER}"\nsha256 = "{sha256_hex(JAVA_READER_TOKEN)}"\n'
        f'[[token.consume]]\ngroup = "{JAVA_READER}"\ntopics = ["{JAVA_TOPIC}"]\n'
    )
    path.chmod(0o600)
    return path


@pytest.fixture
def settings(bootstrap_servers: str, tmp_path: Path) -> dict[str, str]:
    return settings_under(
        tmp_path,
        bootstrap_servers,
        transaction_timeout="3s",
        transaction_check_interval="4s",
        # Never discarded: the checkers answer every check they get.
        transaction_check_max="20",
        auto_create_topic_enable="false",
        topics=f"{TOPIC},{JAVA_TOPIC}",
        **{
            "spark.shuffle_partitions": "2",
            "rest.auth_file": str(write_auth_file(tmp_path / "auth.toml")),
        },
    )


@pytest.fixture
def endpoint(settings: dict[str, str]) -> Iterator[str]:
    with endpoint_process(settings) as address:
        yield address


def final_states(config: Config) -> dict[str, tuple[str, str]]:
    """Return each decided transaction's (state, reason)."""
    return {r.transaction_id: (r.state, r.reason) for r in rows_of(config, "system/transactions")}


def delivered(config: Config, topic: str) -> Counter[str]:
    """Return how many times each transaction is in `topic`'s table."""
    return Counter(r.transaction_id for r in rows_of(config, f"topics/{topic}"))


def join(producer: Producer, consumer: SimpleConsumer) -> list[Message]:
    """Commit a marker until the consumer receives one (its group starts at the end, so it
    has joined); return what it received, acked."""
    deadline = time.monotonic() + BOUND
    joined: list[Message] = []
    while not joined:
        assert time.monotonic() < deadline, "the consumer never received its first message"
        _, transaction = send_half(producer, f"marker-{time.monotonic_ns()}", TOPIC)
        transaction.commit()
        joined = consumer.receive(16, INVISIBLE)
    for message in joined:
        consumer.ack(message)
    return joined


class Run:
    """The scenario's processes and clients, and what they saw."""

    def __init__(self, settings: dict[str, str], endpoint: str, home: Path) -> None:
        self.began = time.monotonic()
        self.config = load_config(overrides=settings)
        self.endpoint, self.home = endpoint, home
        self.runs = AppRuns(settings)
        self.apps: list[AppProcess] = []
        self.checker = KeyedChecker()
        self.producer = Producer(
            client_configuration(endpoint, f"{GROUP}-app", sha256_hex(PRODUCER_TOKEN)),
            (TOPIC,),
            self.checker,
        )
        self.consumer = SimpleConsumer(
            client_configuration(endpoint, CONSUMER_GROUP, sha256_hex(CONSUMER_TOKEN)),
            CONSUMER_GROUP,
            {TOPIC: FilterExpression("*")},
            await_duration=2,
        )
        self.traffic, self.receiver = Traffic(self.producer), Receiver(self.consumer)
        self.java_producer: JavaPeer | None = None
        self.java_reader: JavaPeer | None = None
        self.joined: list[Message] = []
        self.killed_at = self.restarted_at = 0.0

    def received(self, kind: str, after: float = 0.0) -> bool:
        """Whether the consumer acked a transaction of `kind` sent after `after`."""
        sent = self.traffic.sent
        return any(
            kind_of(sent[m][0]) == kind and sent[m][1] > after
            for m in list(self.receiver.acked)
            if m in sent
        )

    def start(self) -> None:
        """The engine, the Java reader, the Python clients; the traffic once joined."""
        self.apps.append(self.runs.start())
        self.java_reader = JavaPeer(
            self.home / "java-reader", "consume", self.endpoint, JAVA_TOPIC, JAVA_READER,
            str(len(JAVA_COMMITTED)), str(BOUND * 3), JAVA_READER, sha256_hex(JAVA_READER_TOKEN),
        )  # fmt: skip
        self.producer.startup()
        self.consumer.startup()
        self.joined = join(self.producer, self.consumer)
        self.traffic.thread.start()
        self.receiver.thread.start()
        assert self.java_reader.wait_for("ready", BOUND), self.java_reader.tail()

    def crash(self) -> None:
        """Kill the engine once it decided by op and by check-back; while it is down the
        Java producer sends all its transactions; start it again."""
        wait_for(
            lambda: self.received("commit") and self.received("open-commit"), BOUND, "decisions"
        )
        self.apps[-1].kill9()  # mid-flow: halves and ends keep coming
        self.killed_at = time.monotonic()
        print(f"engine crash: killed after {self.killed_at - self.began:.0f} s", flush=True)
        self.java_producer = JavaPeer(
            self.home / "java-producer", "produce", self.endpoint, JAVA_TOPIC,
            str(JAVA_COUNT), JAVA_ACCESS_KEY, sha256_hex(JAVA_TOKEN),
        )  # fmt: skip
        producer = self.java_producer
        wait_for(lambda: len(producer.of("sent")) == JAVA_COUNT, BOUND, "the Java sends")
        self.apps.append(self.runs.start())
        self.restarted_at = time.monotonic()
        down = self.restarted_at - self.killed_at
        print(f"engine crash: down {down:.0f} s", flush=True)

    def drain(self) -> dict[str, tuple[str, float]]:
        """After the restart: a commit sent while the engine was down received, a check-back
        answered, then the traffic stopped, every transaction decided and every commit
        received; return the transactions sent."""
        wait_for(lambda: self.received("commit", self.killed_at), BOUND, "a commit sent while down")
        wait_for(
            lambda: any(
                key.startswith("open-") and at > self.restarted_at
                for key, at in list(self.checker.asked)
            ),
            BOUND,
            "a check-back after the restart",
        )
        self.traffic.stop.set()
        self.traffic.thread.join(60)
        sent = dict(self.traffic.sent)
        committed = {t for t, (key, _) in sent.items() if KINDS[kind_of(key)] == "COMMITTED"}

        def drained() -> bool:
            if self.apps[-1].process.poll() is not None:
                self.runs.exited(self.apps[-1], "while draining")
                self.apps.append(self.runs.start())
            states = final_states(self.config)
            return set(sent) <= set(states) and committed <= set(self.receiver.acked)

        wait_for(drained, BOUND, "every transaction decided and every commit received")
        self.receiver.stop.set()
        self.receiver.thread.join(60)
        return sent

    def close(self) -> None:
        self.traffic.stop.set()
        self.receiver.stop.set()
        for peer in (self.java_producer, self.java_reader):
            if peer is not None and peer.process.poll() is None:
                peer.process.kill()
        self.consumer.shutdown()
        self.producer.shutdown()
        for app in self.apps:
            app.kill9()


@pytest.mark.timeout(900)
def test_a_killed_engine_loses_nothing_doubles_nothing_and_checks_again(
    settings: dict[str, str], endpoint: str, tmp_path: Path
) -> None:
    run = Run(settings, endpoint, tmp_path)
    try:
        run.start()
        run.crash()
        sent = run.drain()
        assert run.java_producer is not None and run.java_reader is not None
        java_code = run.java_producer.finish(BOUND)
        reader_code = run.java_reader.finish(BOUND)
    finally:
        run.close()
    states = final_states(run.config)
    print(
        f"engine crash: {time.monotonic() - run.began:.0f} s, {len(sent)} transactions, "
        f"{len(run.checker.asked)} check-backs, {run.runs.report()}, "
        f"end errors {run.traffic.end_errors[:5]}, unsure halves {run.traffic.unsure[:5]}, "
        f"receiver errors {run.receiver.errors[:5]}",
        flush=True,
    )
    verify_python(run, sent, states)
    verify_java(run, states, java_code, reader_code)


def verify_python(
    run: Run, sent: dict[str, tuple[str, float]], states: dict[str, tuple[str, str]]
) -> None:
    """The Python client's transactions: each ended as its key says, each commit delivered
    once to its table and acked once, nothing rolled back delivered, and the halves sent
    while the engine was down checked back at the live producer."""
    # The application's own ends by op, the open ones by the checker's answer (a check may
    # also end one whose end the client did not see acknowledged).
    wrong = {key: states[t] for t, (key, _) in sent.items() if states[t][0] != KINDS[kind_of(key)]}
    assert not wrong, wrong
    by_check = {t for t, (key, _) in sent.items() if key.startswith("open-")}
    assert all(states[t][1] == "check" for t in by_check), {t: states[t] for t in by_check}
    committed = {t for t in sent if states[t][0] == "COMMITTED"}
    rows, acked = delivered(run.config, TOPIC), run.receiver.acked
    # Nothing lost, nothing doubled (a half whose answer the client never got included).
    assert {t: n for t, n in rows.items() if n != 1} == {}
    assert committed <= set(rows), committed - set(rows)
    assert {t: n for t, n in acked.items() if n != 1} == {}
    assert committed <= set(acked), committed - set(acked)
    # Nothing rolled back delivered, to the table or the consumer; nothing unknown acked.
    rolled_back = {t for t in sent if states[t][0] != "COMMITTED"}
    assert not rolled_back & set(rows), rolled_back & set(rows)
    assert not rolled_back & set(acked), rolled_back & set(acked)
    assert set(acked) <= set(rows) | {m.message_id for m in run.joined}
    # The old engine never read the open halves sent while it was down: the new one had
    # them checked back.
    down = {key for key, at in sent.values() if run.killed_at < at < run.restarted_at}
    open_down = {key for key in down if key.startswith("open-")}
    asked = {key for key, _ in run.checker.asked}
    assert open_down and open_down <= asked, (open_down, asked)


def verify_java(
    run: Run, states: dict[str, tuple[str, str]], java_code: int, reader_code: int
) -> None:
    """The Java client's transactions, all sent while the engine was down: its checker was
    asked after the restart (UNKNOWN, then COMMIT at a later check), its SimpleConsumer
    received each commit once and no rollback, its topic table holds each commit once."""
    producer, reader = run.java_producer, run.java_reader
    assert producer is not None and reader is not None
    assert java_code == 0, producer.tail()  # every open one committed by its checker
    assert reader_code == 0, reader.tail()
    sent = {e["key"]: e["message_id"] for e in producer.of("sent")}
    received = Counter(e["key"] for e in reader.of("received"))
    assert received == Counter(JAVA_COMMITTED), received
    ended = {key: states.get(transaction_id, ("", ""))[0] for key, transaction_id in sent.items()}
    assert {key for key, state in ended.items() if state == "COMMITTED"} == set(JAVA_COMMITTED)
    assert {key for key, state in ended.items() if state == "ROLLED_BACK"} == set(sent) - set(
        JAVA_COMMITTED
    )
    rows = delivered(run.config, JAVA_TOPIC)
    assert rows == Counter(sent[key] for key in JAVA_COMMITTED), rows
