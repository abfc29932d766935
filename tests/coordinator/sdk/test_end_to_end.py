"""RocketMQ's mod-5 mix through the SDK, end to end: REST and Kafka transports, real streams.

Two producer groups run at once against one engine: `orders` through the REST ingress and
`payments` straight through Kafka. Each group has three producer instances: the first sends
half of the group's transactions and shuts down before any check comes, so its checks must
be answered by another, live producer of the group (contract 5.3: any live producer
answers, once the sender has not within the sender-first delay); the second sends the other
half, and every check of its transactions is answered by it, never by the third, idle one
(contract 5.3: checks go first to the instance that sent the half).

And a producer application's install: `pip install txcoord` (no extra, so no Spark) in a
fresh virtual environment runs the README's SDK example against the running stack.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from coordinator.core.config import Config
from coordinator.rest.app import create_app
from coordinator.sdk import (
    CheckRequest,
    LocalTransactionState,
    Message,
    TransactionListener,
    TransactionProducer,
)
from tests.coordinator.sdk.http_server import serving
from tests.harness import Engine, count, table, wait_for
from tests.streams.conftest import ConfigFactory

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

ROOT = Path(__file__).resolve().parents[3]
#: What a wheel of txcoord is built from (pyproject's packages and metadata).
SOURCES = (
    "pyproject.toml",
    "README.md",
    "delta_tables",
    "streams",
    "coordinator",
)

PLAN = ["commit", "rollback", "commit_when_checked", "rollback_when_checked", "unknown"]
PER_GROUP = 10
#: The first producer's transactions are not checked before this many seconds: it is shut
#: down by then, however slowly a loaded machine sends (their checks must reach `second`).
FIRST_IMMUNITY_SECONDS = 15
#: How long a check waits for its sender before another instance answers it: long enough
#: that a loaded machine's sender always answers (and claims) first, shorter than a check
#: interval so the first producer's checks are still answered in time.
SENDER_FIRST_SECONDS = 5
State = LocalTransactionState


def plan_of(tx: str) -> str:
    return PLAN[int(tx.rsplit("-", 1)[1]) % 5]


class Mod5Listener(TransactionListener):
    """Decides as RocketMQ's test does; remembers which checks it answered."""

    def __init__(self) -> None:
        self.checked: Counter[str] = Counter()
        self._lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: Any) -> State:
        assert msg.transaction_id is not None
        plan = plan_of(msg.transaction_id)
        return {"commit": State.COMMIT_MESSAGE, "rollback": State.ROLLBACK_MESSAGE}.get(
            plan, State.UNKNOW
        )

    def check_local_transaction(self, msg: CheckRequest) -> State:
        with self._lock:
            self.checked[msg.transaction_id] += 1
        answers = {
            "commit_when_checked": State.COMMIT_MESSAGE,
            "rollback_when_checked": State.ROLLBACK_MESSAGE,
        }
        return answers.get(plan_of(msg.transaction_id), State.UNKNOW)


@pytest.fixture
def config(make_config: ConfigFactory) -> Config:
    # An answer decides if it is stored before the discard is due (store time, contract 3): a
    # checked transaction has three intervals, from its first check, for the round trip
    # (check topic -> SDK -> ingress -> coordinator), each longer than a check's lag.
    return make_config(
        transaction_timeout="3s",
        transaction_check_interval="8s",
        transaction_check_max="3",
        **{"rest.check_sender_first": f"{SENDER_FIRST_SECONDS}s"},
    )


def producer(
    group: str,
    listener: TransactionListener,
    config: Config,
    endpoint: str | None,
    instance: str,
) -> TransactionProducer:
    kafka = config.kafka
    routing: dict[str, Any] = {
        "instance_id": f"{group}-{instance}",
        "check_sender_first_seconds": SENDER_FIRST_SECONDS,
        "poll_wait_seconds": 1.0,
    }
    if endpoint is not None:
        return TransactionProducer(group, listener, endpoint=endpoint, **routing)
    return TransactionProducer(
        group,
        listener,
        bootstrap_servers=kafka.bootstrap_servers,
        half_topic=kafka.half_topic,
        op_topic=kafka.op_topic,
        check_topic=kafka.check_topic,
        **routing,
    )


def test_mod5_through_the_sdk_over_rest_and_kafka_with_a_producer_gone(
    spark: SparkSession, config: Config, engine: Engine
) -> None:
    seconds: dict[str, Mod5Listener] = {}
    idle: dict[str, Mod5Listener] = {}
    survivors: list[TransactionProducer] = []
    with serving(create_app(config)) as endpoint:
        try:
            for group, url in (("orders", endpoint), ("payments", None)):
                first = producer(group, Mod5Listener(), config, url, "first")
                seconds[group], idle[group] = Mod5Listener(), Mod5Listener()
                second = producer(group, seconds[group], config, url, "second")
                third = producer(group, idle[group], config, url, "idle")
                for live in (second, third):
                    live.start()
                    survivors.append(live)
                with first:
                    for i in range(PER_GROUP // 2):
                        first.send_message_in_transaction(
                            message(group, i, immunity=FIRST_IMMUNITY_SECONDS)
                        )
                # `first` is shut down: its transactions' checks go to `second` or `third`.
                for i in range(PER_GROUP // 2, PER_GROUP):
                    second.send_message_in_transaction(message(group, i))
            wait_for(
                lambda: count(config, "system/transactions") >= 2 * PER_GROUP,
                600,
                "every transaction to end",
            )
        finally:
            for survivor in survivors:
                survivor.shutdown()

    finals = {
        r.transaction_id: (r.state, r.reason)
        for r in table(spark, config, "system/transactions").collect()
    }
    expected = {
        "commit": ("COMMITTED", "op"),
        "rollback": ("ROLLED_BACK", "op"),
        "commit_when_checked": ("COMMITTED", "check"),
        "rollback_when_checked": ("ROLLED_BACK", "check"),
        "unknown": ("DISCARDED", "check_max"),
    }
    txs = [f"{group}-{i}" for group in ("orders", "payments") for i in range(PER_GROUP)]
    assert finals == {tx: expected[plan_of(tx)] for tx in txs}
    assert table(spark, config, "system/transactions").count() == len(txs)
    delivered = Counter(r.transaction_id for r in table(spark, config, "topics/Orders").collect())
    assert delivered == {tx: 1 for tx in txs if plan_of(tx).startswith("commit")}
    checked = ("commit_when_checked", "rollback_when_checked", "unknown")
    for group in ("orders", "payments"):
        sent_by = {"first": range(PER_GROUP // 2), "second": range(PER_GROUP // 2, PER_GROUP)}
        asked = {
            who: {f"{group}-{i}" for i in numbers if plan_of(f"{group}-{i}") in checked}
            for who, numbers in sent_by.items()
        }
        # The gone producer's checks were answered by a live one, after the delay.
        by_second, by_third = seconds[group].checked, idle[group].checked
        assert asked["first"] <= set(by_second) | set(by_third), (group, by_second, by_third)
        # The sender answered the checks of its own transactions (the unknown ones at every
        # check number): the idle instance, owner of some check partitions, never had to.
        assert asked["second"] <= set(by_second), (group, by_second)
        assert not asked["second"] & set(by_third), (group, by_third)


def message(group: str, i: int, immunity: int | None = None) -> Message:
    return Message(
        topic="Orders",
        body=f"{group} {i}".encode(),
        keys=[f"o-{i}"],
        transaction_id=f"{group}-{i}",
        check_immunity_seconds=immunity,
    )


def readme_sdk_example() -> str:
    """Return the README's Python SDK example (the code block that starts a producer)."""
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    (example,) = [str(block) for block in blocks if "TransactionProducer(" in block]
    return example


def sdk_only_venv(tmp_path: Path) -> Path:
    """Return the python of a fresh venv with `pip install txcoord`: the base, no extra."""
    source = tmp_path / "txcoord"
    source.mkdir()
    for name in SOURCES:  # a copy, so the build leaves nothing in the checkout
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(source)], check=True, timeout=600
    )
    return python


def test_the_readme_sdk_example_runs_from_an_sdk_only_install(
    spark: SparkSession, config: Config, engine: Engine, tmp_path: Path
) -> None:
    python = sdk_only_venv(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    no_spark = subprocess.run(
        [str(python), "-c", "import importlib.util as u; print(u.find_spec('pyspark'))"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert no_spark.stdout.strip() == "None"  # the base install pulled no Spark
    # ... and kafka-python's native CRC-32C: every record batch sent or read is checked, in
    # pure Python without it.
    native_crc = subprocess.run(
        [str(python), "-c", "import kafka.record.util as u; print(u.crc32c_c is not None)"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert native_crc.stdout.strip() == "True"
    with serving(create_app(config)) as endpoint:
        example = readme_sdk_example().replace("http://127.0.0.1:8080", endpoint)
        # The example, then proof that it ran on the venv's txcoord and loaded no Spark.
        check = (
            "\nimport sys, coordinator\nassert 'pyspark' not in sys.modules\n"
            "print(coordinator.__file__)\n"
        )
        ran = subprocess.run(
            [str(python), "-c", example + check],
            env=env,
            cwd=tmp_path,
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip().startswith(str(tmp_path / "venv"))
        wait_for(
            lambda: count(config, "system/transactions") >= 1,
            300,
            "the README's transaction to end",
        )
    (final,) = table(spark, config, "system/transactions").collect()
    assert (final.producer_group, final.state, final.reason) == ("orders", "COMMITTED", "op")
    (delivered,) = table(spark, config, "topics/OrderPaid").collect()
    assert bytes(delivered.body) == b"paid"

    # The `txcoord` command line of that install: its help lists every command, and a
    # command that needs the engine says how to get it, in one line, without a traceback.
    txcoord = str(python.parent / "txcoord")
    shown = subprocess.run(
        [txcoord, "--help"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert all(f"  {name} " in shown.stdout for name in ("up", "demo", "bench")), shown.stdout
    refused = subprocess.run(
        [txcoord, "up"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert refused.returncode == 1
    # Which engine package it names first depends on the import order; one line, that form.
    assert re.fullmatch(
        r"Error: txcoord up needs the engine's packages \((pyspark|delta|"
        r"pyarrow|pandas|deltalake|fastapi|uvicorn|prometheus_client)"
        r" is not installed\): pip install 'txcoord\[engine\]'\n",
        refused.stderr,
    ), refused.stderr
