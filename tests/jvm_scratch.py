"""One scratch folder for every JVM a test run starts, removed when the run ends.

A JVM keeps its scratch files under `java.io.tmpdir` (`/tmp`): Spark's local directory (the
copied connector jars, shuffle blocks, RocksDB's working copies of the state), RocksDB's and
LZ4's native libraries unpacked for the process, about 45 MB per Spark driver. Shutdown
hooks remove them, and a JVM killed with SIGKILL runs none: the suite kills many on purpose
(contract 7's `kill -9` tests, a test that stops an application the hard way), and on a machine
that ran the suite all day their leftovers had taken 26 GB of its disk.

So the run's first process (pytest's controller, before its xdist workers start) makes one
folder, `<tmp>/txcoord-tests-<pid>-<random>`, points `java.io.tmpdir` of every JVM the tests
start at it (through `SPARK_SUBMIT_OPTS` and `KAFKA_OPTS`, tests/conftest.py), and removes
it when the run ends; a run that was itself killed leaves its folder to the next run, which
removes every such folder whose process is gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tests.processes import pid_alive

#: The variable that hands the controller's folder to its workers (not `TXCOORD_*`: the
#: application reads those as configuration and refuses unknown ones).
SCRATCH_ENV = "TESTS_JVM_SCRATCH"
PREFIX = "txcoord-tests-"


def owner_pid(path: Path) -> int | None:
    """Return the pid in a scratch folder's name, or None for a name that holds none."""
    pid = path.name.removeprefix(PREFIX).split("-", 1)[0]
    return int(pid) if pid.isdigit() else None


def sweep_abandoned(root: Path) -> list[Path]:
    """Remove the scratch folders under `root` whose run's process is gone; return them."""
    removed = []
    for path in sorted(root.glob(f"{PREFIX}*")):
        pid = owner_pid(path)
        if path.is_dir() and pid is not None and not pid_alive(pid):  # a reused pid keeps it
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def run_scratch() -> tuple[Path, bool]:
    """Return this run's scratch folder and whether this process made it (the controller).

    A worker finds the controller's folder in its environment; the first process sweeps
    abandoned folders, makes the run's and puts it in the environment for the workers.
    """
    inherited = os.environ.get(SCRATCH_ENV)
    if inherited:
        return Path(inherited), False
    root = Path(tempfile.gettempdir())
    sweep_abandoned(root)
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=root))
    os.environ[SCRATCH_ENV] = str(path)
    return path, True
