"""The analyst notebooks, executed headless against the warehouse of a short real run.

One run of the engine (tests/harness.py) fills a warehouse with every kind of transaction:
committed to two topics and two queues, rolled back, decided by a check answer (COMMIT and
ROLLBACK), never answered (discarded after `transaction_check_max` checks), one still being
checked and one left pending when the engine stops. Each notebook then runs in a fresh
kernel of this venv (nbclient) with its own small Spark session; any cell error fails the
test, including a result cell's assertion that it found rows.

`make notebooks-rendered` runs the same test with `NOTEBOOKS_RENDERED=notebooks/rendered`:
each executed notebook is also saved there with its outputs (the plots a code host shows),
without the machine's paths. The committed copies are checked against their notebooks here.
"""

from __future__ import annotations

import copy
import os
import re
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from pyspark.sql import SparkSession

from coordinator.core.config import Config, load_config
from tests.harness import Engine, Producer, Responder, table, wait_for

pytestmark = pytest.mark.long

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
#: The folder of the rendered copies (committed), and the variable that has them written.
RENDERED = NOTEBOOKS / "rendered"
RENDERED_ENV = "NOTEBOOKS_RENDERED"
NAMES = ("transaction_health", "topic_explorer")
TIMEOUT = "3s"
PAID, SHIPPED = "OrderPaid", "OrderShipped"
COMMITTED = [f"paid-{n}" for n in range(4)] + [f"shipped-{n}" for n in range(2)]
ROLLED_BACK = ["rollback-0", "rollback-1"]
#: How the group answers check requests, by transaction id (absent: never).
ANSWERS = {"checked-commit": "COMMIT", "checked-rollback": "ROLLBACK"}
DECIDED = [*COMMITTED, *ROLLED_BACK, *ANSWERS, "never-answered"]
#: Least number of plots each notebook draws (one PNG per plot cell that had rows).
PLOTS = {"transaction_health": 5, "topic_explorer": 3}


@dataclass(frozen=True)
class Run:
    """The warehouse a finished run left behind."""

    warehouse: Path
    topic: str


def run_config(bootstrap_servers: str, root: Path) -> Config:
    """Return the run's configuration: short timeout, three checks 5 s apart, own topics."""
    suffix = uuid.uuid4().hex[:8]
    return load_config(
        overrides={
            "warehouse": str(root / "warehouse"),
            "kafka.bootstrap_servers": bootstrap_servers,
            "kafka.half_topic": f"half-{suffix}",
            "kafka.op_topic": f"op-{suffix}",
            "kafka.check_topic": f"check-{suffix}",
            "kafka.partitions": "2",
            "streams.checkpoint_dir": str(root / "checkpoints"),
            "streams.trigger_interval": "1s",
            "streams.tick_interval": "1s",
            "transaction_timeout": TIMEOUT,
            # An answer decides if it is stored before the discard is due (store time):
            # three intervals from the first check, each longer than a check's lag.
            "transaction_check_interval": "5s",
            "transaction_check_max": "3",
        }
    )


def ids(spark: SparkSession, config: Config, name: str) -> set[str]:
    """Return the transaction ids in table `name`."""
    return {row.transaction_id for row in table(spark, config, name).collect()}


def produce(spark: SparkSession, config: Config) -> None:
    """Send the mix of the module docstring; return once the engine has acted on all of it."""
    responder = Responder(config, lambda request: ANSWERS.get(request["transaction_id"]))
    producer = Producer(config)
    try:
        for n, tx in enumerate(COMMITTED):
            producer.half(tx, topic=PAID if tx.startswith("paid") else SHIPPED, queue_id=n % 2)
        for tx in [*ROLLED_BACK, *ANSWERS, "never-answered"]:
            producer.half(tx, topic=PAID, queue_id=0)
        producer.flush()
        for tx in COMMITTED:
            producer.op(tx, "COMMIT")
        for tx in ROLLED_BACK:
            producer.op(tx, "ROLLBACK")
        producer.flush()

        def decided() -> bool:
            return set(DECIDED) <= ids(spark, config, "system/transactions")

        wait_for(decided, 300, "every transaction but two to reach a final state")
        # Left unresolved when the engine stops: one already checked (its discard is three
        # intervals after its first check), one immune to checks for an hour.
        producer.half("checking", topic=PAID, queue_id=1)
        producer.half("pending", topic=PAID, queue_id=1, immunity="3600")
        producer.flush()

        def in_flight() -> bool:
            return "checking" in ids(spark, config, "system/check_requests") and "pending" in ids(
                spark, config, "system/half_messages"
            )

        wait_for(in_flight, 180, "'checking' to be checked and 'pending' to land")
    finally:
        producer.close()
        responder.stop()


@pytest.fixture(scope="module")
def run(
    spark: SparkSession, bootstrap_servers: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Run]:
    """Return the warehouse of a finished run; the engine is stopped before any notebook runs."""
    config = run_config(bootstrap_servers, tmp_path_factory.mktemp("notebook-run"))
    engine = Engine(spark, config)
    try:
        produce(spark, config)
    finally:
        engine.stop()
    assert "pending" not in ids(spark, config, "system/transactions")
    assert "pending" not in ids(spark, config, "system/check_requests")
    yield Run(warehouse=Path(config.warehouse), topic=PAID)


def execute(name: str, run: Run, workdir: Path) -> nbformat.NotebookNode:
    """Run notebook `name` in a fresh python3 kernel of this venv; raise on any cell error."""
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    # The kernel must be this interpreter (the venv with txcoord installed): jupyter_client
    # maps the kernelspec's "python" to sys.executable; this cell proves it did.
    expected = str(Path(sys.executable).resolve())
    notebook.cells.insert(
        0,
        nbformat.v4.new_code_cell(
            "import sys, pathlib\n"
            f"assert str(pathlib.Path(sys.executable).resolve()) == {expected!r}, sys.executable"
        ),
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYSPARK_GATEWAY")}
    env.update(
        TXCOORD_WAREHOUSE=str(run.warehouse),
        TXCOORD_TOPIC=run.topic,
        TXCOORD_TRANSACTION_TIMEOUT=TIMEOUT,
    )
    client = NotebookClient(
        notebook,
        kernel_name="python3",
        timeout=600,
        startup_timeout=120,
        resources={"metadata": {"path": str(workdir)}},  # the kernel's working directory
    )
    try:
        client.execute(env=env)
    finally:  # kept for a look at what each cell showed, or where it failed
        nbformat.write(notebook, workdir / f"{name}.ipynb")
    return notebook


def rendered(notebook: nbformat.NotebookNode, run: Run, workdir: Path) -> nbformat.NotebookNode:
    """Return an executed notebook as committed: without the interpreter check, its links one
    folder deeper (notebooks/rendered/), no timings, and no path of this machine."""
    fit = copy.deepcopy(notebook)
    del fit.cells[0]  # execute's check of the kernel's interpreter
    paths = {
        str(run.warehouse): "warehouse",
        str(workdir): ".",
        str(ROOT): ".",
        str(Path(sys.executable).parent): ".venv/bin",
        str(Path.home()): "~",
    }
    pattern = re.compile("|".join(re.escape(p) for p in sorted(paths, key=len, reverse=True)))

    def scrub(text: str) -> str:
        return re.sub(r"/tmp/[^\s'\"]*", "<tmp>", pattern.sub(lambda m: paths[m.group(0)], text))

    for cell in fit.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "markdown":
            cell.source = re.sub(r"\]\(\.\./", "](../../", cell.source)
        for output in cell.get("outputs", []):
            if "text" in output:
                output.text = scrub(output.text)
            for kind, value in output.get("data", {}).items():
                if kind.startswith("text/") and isinstance(value, str):
                    output.data[kind] = scrub(value)
            if "traceback" in output:
                output.traceback = [scrub(line) for line in output.traceback]
    return fit


def images(notebook: nbformat.NotebookNode) -> int:
    """Return how many PNG outputs the executed notebook holds."""
    return sum(
        "image/png" in output.get("data", {})
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
    )


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_against_a_real_warehouse(name: str, run: Run, tmp_path: Path) -> None:
    executed = execute(name, run, tmp_path)

    assert images(executed) >= PLOTS[name], f"{name} drew {images(executed)} plots"
    if folder := os.environ.get(RENDERED_ENV):  # make notebooks-rendered
        Path(folder).mkdir(parents=True, exist_ok=True)
        nbformat.write(rendered(executed, run, tmp_path), Path(folder) / f"{name}.ipynb")


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_committed_clean(name: str) -> None:
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]

    assert [c.id for c in code if c.outputs or c.execution_count is not None] == [], (
        f"{name}: clear the outputs before committing"
    )
    parameters = code[0]
    assert "parameters" in parameters.metadata.get("tags", []), "first code cell: parameters"
    assert "TXCOORD_WAREHOUSE" in parameters.source and "TXCOORD_TOPIC" in parameters.source
    assert code[-1].source.strip() == "spark.stop()"


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_committed_rendered(name: str) -> None:
    """notebooks/rendered/ holds each notebook's code as it is now, run, with its plots."""
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    copy_path = RENDERED / f"{name}.ipynb"
    assert copy_path.is_file(), f"{copy_path}: run `make notebooks-rendered`"
    shown = nbformat.read(copy_path, as_version=4)
    nbformat.validate(shown)

    def code(nb: nbformat.NotebookNode) -> list[str]:
        return [cell.source for cell in nb.cells if cell.cell_type == "code"]

    assert code(shown) == code(notebook), f"{name} changed: run `make notebooks-rendered`"
    assert images(shown) >= PLOTS[name]
    text = copy_path.read_text()
    assert str(ROOT) not in text and "/tmp/" not in text and str(Path.home()) not in text
