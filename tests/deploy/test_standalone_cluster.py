"""Operators: `deploy/submit-coordinator --master spark://…` on a real Spark standalone cluster.

One master and one worker from pyspark's own distribution
(coordinator/runtime/local_stack/spark_cluster.py); the
driver runs here, the streams' tasks and their Python workers on the worker's executor,
which gets the connector jars from `--jars` and runs the venv's interpreter. A committed,
a rolled-back and a checked-then-committed transaction must end as they do on local[*];
the master must show the application with cores granted, then finished; SIGTERM must stop
it cleanly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from coordinator.core.config import Config
from coordinator.runtime.local_stack.spark_cluster import ClusterError, StandaloneCluster
from tests.app_process import AppProcess
from tests.conftest import ConfigFactory, unavailable
from tests.harness import TOPIC, Producer, Responder, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long(0.9)]

APP_NAME = "txcoord-coordinator"  # coordinator/app.py's Spark application name
#: Each transaction and the op its producer sends; None: no op, COMMIT once checked.
PLAN = {"tx-1": "COMMIT", "tx-2": "ROLLBACK", "tx-3": "COMMIT", "tx-4": None, "tx-5": "COMMIT"}
FINAL = {tx: "ROLLED_BACK" if op == "ROLLBACK" else "COMMITTED" for tx, op in PLAN.items()}


def answer(request: dict[str, Any]) -> str:
    """The check listener: the producer's own decision, COMMIT for the undecided one."""
    return PLAN[request["transaction_id"]] or "COMMIT"


def rows(config: Config, name: str) -> list[dict[str, Any]]:
    """Return the rows of warehouse table `name`, read by delta-rs ([] until its first commit)."""
    path = Path(config.warehouse) / name
    if not any((path / "_delta_log").glob("*.json")):  # the folder comes before the commit
        return []
    table: list[dict[str, Any]] = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    return table


def send_and_answer(config: Config) -> None:
    """Send PLAN, answer checks, and return once every transaction has its final state."""
    producer, responder = Producer(config), Responder(config, answer)
    try:
        for tx, op in PLAN.items():
            producer.half(tx, queue_id=0)
            if op is not None:
                producer.op(tx, op)
        producer.flush()
        wait_for(
            lambda: len(rows(config, "system/transactions")) >= len(PLAN),
            300,
            f"final states of all {len(PLAN)} transactions",
        )
    finally:
        responder.stop()
        producer.close()


@pytest.mark.timeout(900)  # cluster ~20 s, application start 1-3 min on a loaded 2-core box
def test_coordinator_runs_on_a_standalone_cluster(
    make_config: ConfigFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    overrides = {
        "transaction_timeout": "3s",
        "transaction_check_interval": "12s",
        "transaction_check_max": "3",
        "spark.shuffle_partitions": "2",
    }
    config = make_config(**overrides)
    settings = {
        **overrides,
        "warehouse": config.warehouse,
        "kafka.bootstrap_servers": config.kafka.bootstrap_servers,
        "kafka.half_topic": config.kafka.half_topic,
        "kafka.op_topic": config.kafka.op_topic,
        "kafka.check_topic": config.kafka.check_topic,
        "kafka.partitions": str(config.kafka.partitions),
        "streams.checkpoint_dir": config.streams.checkpoint_dir,
    }
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")  # the driver on loopback, as the cluster
    try:
        cluster = StandaloneCluster(tmp_path / "spark", cores=2, memory="2g").start()
    except ClusterError as exc:
        unavailable("Spark standalone cluster", exc)
    with cluster:  # kills master, worker and executors; prints their logs on a failure
        executors = {"spark.executor.memory": "1g", "spark.cores.max": "2"}
        app = AppProcess(settings, master=cluster.master_url, spark_conf=executors)
        try:
            assert app.wait_for_line("txcoord coordinator running", 400), app.tail()
            wait_for(
                lambda: (
                    [a["state"] for a in cluster.applications(APP_NAME) if a["cores"] >= 1]
                    == ["RUNNING"]
                ),
                60,
                "the master to grant the application cores",
            )
            send_and_answer(config)
        finally:
            code = app.terminate() if app.process.poll() is None else app.process.returncode
        assert code == 0, app.tail()
        assert "txcoord coordinator stopped cleanly" in app.tail(400), app.tail()
        wait_for(
            lambda: [a["state"] for a in cluster.applications(APP_NAME)] == ["FINISHED"],
            30,
            "the master to list the application as finished",
        )
        # The worker's executor ran the tasks, and none of them in Python: the stage and the
        # ingest rules run in the JVM, and the batch's rows reach the driver as Arrow.
        logs = "".join(cluster.executor_logs().values())
        assert "Finished task" in logs, "no executor of the worker ran a task"
        assert "PythonRunner" not in logs, "a Python worker ran on the worker's executor"

    finals = rows(config, "system/transactions")
    assert sorted((r["transaction_id"], r["state"]) for r in finals) == sorted(FINAL.items())
    delivered = sorted(rows(config, f"topics/{TOPIC}"), key=lambda r: r["queue_offset"])
    committed = sorted(tx for tx, state in FINAL.items() if state == "COMMITTED")
    assert sorted(r["transaction_id"] for r in delivered) == committed
    assert [(r["queue_id"], r["queue_offset"]) for r in delivered] == [
        (0, n) for n in range(len(committed))
    ]
    assert all(r["body"] == f"body-{r['transaction_id']}".encode() for r in delivered)
    checked = {r["transaction_id"] for r in rows(config, "system/check_requests")}
    assert "tx-4" in checked
