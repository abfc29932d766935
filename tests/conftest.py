"""Shared fixtures: one real Spark session and one real KRaft broker per test session.

With `CI=true` a component that cannot start fails every test that needs it; elsewhere
those tests are skipped with the reason, so a laptop without Java can still run the
pure unit tests. Nothing here is ever mocked.

A test that starts the product's own Spark or Kafka (spark-submit, `txcoord up`, the broker
command, the broker launcher) first asks for the session's `spark` / `kafka_broker`: once those
have started, the component can start on this machine, and anything that goes wrong after that
is the product's failure, a plain test failure, never a skip.

Every JVM a test starts through Spark or the broker launcher (the session's Spark, the
applications of spark-submit, `txcoord up`, the bench's smoke run, every test broker)
compiles with C1 only (`-XX:TieredStopAtLevel=1`, with tiered's code cache, in
`SPARK_SUBMIT_OPTS`, which spark-submit gives the driver's JVM, and in `KAFKA_OPTS`, which
the broker launcher adds): a test's JVM lives for seconds to minutes, and a fresh one spent
about half its CPU in the C2 compiler's threads (a ticking application, 45-75 s after its
start). The Spark JVMs collect with the serial collector (TEST_SPARK_JVM_OPTIONS).
Behaviour is the same; performance is measured by `txcoord bench` run outside the tests,
with the JVM's defaults. The same variables give them the run's own scratch folder
as `java.io.tmpdir`, removed when the run ends, so the JVMs the tests kill leave nothing
behind (tests/jvm_scratch.py).

Randomness in tests comes from the `rng` fixture: a `random.Random` whose seed is printed and
reported with a failure; `TXCOORD_TEST_SEED=<seed>` replays it. The variable is taken out of
this process's environment at once (the application reads every `TXCOORD_*` variable as
configuration and would refuse an unknown one, in this process and in its subprocesses).
"""

from __future__ import annotations

import os
import random
import secrets
import shutil
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

from coordinator.core.config import Config, load_config
from coordinator.kafka_clients.admin import delete_topic, ensure_topic
from coordinator.runtime.local_stack.kafka_broker import BrokerSettings, KafkaBroker
from coordinator.runtime.local_stack.kafka_cluster import ClusterSettings, KafkaCluster
from coordinator.runtime.local_stack.s3_server import S3Server
from coordinator.runtime.spark_session import SparkSettings, build_spark_session
from tests.gate_budget import Budget, GateClock, module_of
from tests.harness import Engine
from tests.jvm_scratch import run_scratch
from tests.scheduling import make_scheduler

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
SEED_ENV = "TXCOORD_TEST_SEED"
#: The seed a run was asked to replay, if any (removed from the environment: see above).
SEED_OVERRIDE = os.environ.pop(SEED_ENV, None)
SEED_KEY = pytest.StashKey[int]()
#: The JIT of short-lived test JVMs (see above); set before any JVM starts. C1 alone gets a
#: 48 MiB code cache by default, which the session's Spark JVM (a whole worker's share of
#: the suite, the stage's huge generated methods compiled: JIT_OPTIONS) filled, and then died
#: of ("Out of space in CodeCache for method handle intrinsic"): it gets tiered's 240 MiB.
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
#: The collector of the tests' Spark JVMs (the session's, the applications', the commands'):
#: the serial one. Their heaps are 1-2 GiB on a 2-core machine the suite keeps busy, where
#: G1's concurrent threads and write barriers are CPU the tests do not have: measured on the
#: same four in-process modules (test_event_time, test_store_time, test_rules,
#: test_decision_query, one process), 287 CPU-seconds with G1, 239 with the serial collector,
#: the same wall time. Not the brokers': their launcher names G1 (KAFKA_JVM_FLAGS).
TEST_SPARK_JVM_OPTIONS = "-XX:+UseSerialGC"
#: Where every JVM of this run keeps its scratch files (tests/jvm_scratch.py).
JVM_SCRATCH, MADE_SCRATCH = run_scratch()
if MADE_SCRATCH:  # the run's first process; its workers inherit the environment
    for _variable in ("SPARK_SUBMIT_OPTS", "KAFKA_OPTS"):  # Spark's JVMs, the test brokers
        os.environ[_variable] = " ".join(
            filter(
                None,
                [
                    os.environ.get(_variable),
                    TEST_JVM_OPTIONS,
                    TEST_SPARK_JVM_OPTIONS if _variable == "SPARK_SUBMIT_OPTS" else "",
                    f"-Djava.io.tmpdir={JVM_SCRATCH}",
                ],
            )
        )


def unavailable(component: str, error: BaseException) -> NoReturn:
    """Fail (in CI) or skip (elsewhere) a test whose component could not start.

    Only for Spark or Kafka that cannot start: a product that fails (a timeout, an exit code,
    an application that never says it runs) fails the test, in CI and elsewhere.
    """
    message = f"{component} could not start: {type(error).__name__}: {error}"
    if IN_CI:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSession]:
    """Return the session-wide local SparkSession (Delta, RocksDB state, Kafka connector)."""
    try:
        session = build_spark_session(
            SparkSettings(
                app_name="txcoord-tests",
                warehouse=str(tmp_path_factory.mktemp("spark-warehouse")),
                shuffle_partitions=2,
                driver_memory="2g",
            )
        )
    except Exception as exc:
        unavailable("Spark", exc)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """Return the session-wide single-node KRaft broker on 127.0.0.1."""
    broker = KafkaBroker(BrokerSettings(data_dir=tmp_path_factory.mktemp("kafka")))
    try:
        broker.start()
    except Exception as exc:
        unavailable("Kafka", exc)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[KafkaCluster]:
    """A three-node cluster of this test's own (its nodes get killed); ports kept on restarts."""
    own = KafkaCluster(ClusterSettings(tmp_path / "cluster"))
    try:
        own.start()
    except Exception as exc:
        unavailable("a three-node Kafka cluster", exc)
    try:
        yield own
    finally:
        own.stop()


@pytest.fixture(scope="session")
def s3_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """Return the session's S3 API on loopback (moto's server)."""
    try:
        server = S3Server(tmp_path_factory.mktemp("s3-api"))
    except Exception as exc:
        unavailable("an S3 API (moto's server)", exc)
    yield server
    server.stop()


@pytest.fixture
def s3_warehouse(s3_api: S3Server, monkeypatch: pytest.MonkeyPatch) -> str:
    """Return an `s3a://` warehouse in a bucket of the test's own; delta-rs reaches it
    through the AWS_* variables, set for the test's duration."""
    for name, value in s3_api.environment().items():
        monkeypatch.setenv(name, value)
    return f"s3a://{s3_api.bucket()}/warehouse"


@pytest.fixture(scope="session")
def bootstrap_servers(kafka_broker: KafkaBroker) -> str:
    """Return `host:port` of the session's broker."""
    return kafka_broker.bootstrap_servers


@pytest.fixture
def kafka_topic(bootstrap_servers: str) -> Iterator[str]:
    """Return a fresh uuid-named topic with 2 partitions, deleted after the test."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    ensure_topic(bootstrap_servers, name, partitions=2)
    try:
        yield name
    finally:
        delete_topic(bootstrap_servers, name)


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    """Return an empty warehouse folder of this test's own."""
    path = tmp_path / "warehouse"
    path.mkdir()
    return path


#: Builds a configuration with uuid-named topics and folders of the test's own.
ConfigFactory = Callable[..., Config]


def settings_under(root: Path, bootstrap_servers: str, **overrides: str) -> dict[str, str]:
    """Return the overrides of a configuration with uuid-named topics and its warehouse
    under `root` (for a command line's `--set`s)."""
    suffix = uuid.uuid4().hex[:8]
    return {
        "warehouse": str(root / "warehouse"),
        "kafka.bootstrap_servers": bootstrap_servers,
        "kafka.half_topic": f"half-{suffix}",
        "kafka.op_topic": f"op-{suffix}",
        "kafka.check_topic": f"check-{suffix}",
        "kafka.deliveries_topic": f"deliveries-{suffix}",
        "kafka.consumer_offsets_topic": f"consumer-offsets-{suffix}",
        "kafka.partitions": "2",
        "streams.checkpoint_dir": str(root / "checkpoints"),
        "metrics.port": "0",  # any free port: tests may run engines side by side
        **overrides,
    }


def config_under(root: Path, bootstrap_servers: str, **overrides: str) -> Config:
    """Return a configuration with uuid-named topics and its warehouse under `root`."""
    return load_config(overrides=settings_under(root, bootstrap_servers, **overrides))


@pytest.fixture
def make_config(bootstrap_servers: str, tmp_path: Path) -> ConfigFactory:
    """Return a factory of configurations with uuid-named topics and a private warehouse."""

    def make(**overrides: str) -> Config:
        return config_under(tmp_path, bootstrap_servers, **overrides)

    return make


@pytest.fixture
def engine(spark: SparkSession, config: Config) -> Iterator[Engine]:
    """Return the real engine on the test module's `config` fixture, started; stopped after.

    Stopping fails the test if a query had failed meanwhile (tests/harness.py).
    """
    running = Engine(spark, config)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """Return this test's random generator; its seed is printed and reported on failure."""
    seed = int(SEED_OVERRIDE) if SEED_OVERRIDE else secrets.randbelow(2**31)
    request.node.stash[SEED_KEY] = seed
    print(f"\n{request.node.name}: seed {seed} (replay with {SEED_ENV}={seed})", flush=True)
    return random.Random(seed)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the `long` modules first, longest first, and everything else after, in its order.

    `make test` runs the suite in three workers, one module at a time each, handed out in
    this order (`--no-loadscope-reorder`: xdist would otherwise hand out the modules with
    the most tests first): longest first leaves the least idle time at the end, when one
    worker would wait for the other's last module. tests/budget.toml gives each `long`
    module's usual length on 2 cores, measured (`--durations`, summed per module); the
    others take seconds.
    """

    budget = Budget.load()

    def order(item: pytest.Item) -> tuple[bool, float]:
        minutes = budget.minutes(module_of(item.nodeid))
        return minutes == 0, -minutes

    items.sort(key=order)


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Hand out whole modules, and the modules of tests/scheduling.py's SHARED_UNITS as one
    (before xdist's own hook, which would answer first)."""
    return make_scheduler(config, log)


def pytest_configure(config: pytest.Config) -> None:
    """Time the run against tests/budget.toml, in the process that reports (xdist's
    controller, or the only one)."""
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(GateClock(Budget.load()), "gate-clock")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Name the seed in the report of a failed test that drew random numbers."""
    report = yield
    seed = item.stash.get(SEED_KEY, None)
    if seed is not None and report.failed:
        report.sections.append(("random seed", f"replay with {SEED_ENV}={seed}"))
    return report


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's JVM scratch folder once the run's first process is done."""
    if MADE_SCRATCH:
        shutil.rmtree(JVM_SCRATCH, ignore_errors=True)


def pytest_report_header() -> list[str]:
    """Name the JVMs' scratch folder and the free space where it lives."""
    free = shutil.disk_usage(JVM_SCRATCH).free / 2**30
    return [f"JVM scratch: {JVM_SCRATCH} ({free:.1f} GiB free)"]
