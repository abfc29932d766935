"""The command line loads a command's module only when that command is used.

`txcoord --help` must not import Spark (a producer's install has none, and every command
would pay for it at start); a command whose module needs a package that is not installed is
listed and refused with a one-line error that names the extra to install.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from coordinator.cli import COMMANDS, OWN_PACKAGES

#: Runs the command line in a fresh interpreter with the packages named in argv[1] hidden
#: (comma-separated, may be empty), then prints the txcoord modules the run imported.
RUN = """
import sys
for name in filter(None, sys.argv[1].split(",")):
    sys.modules[name] = None  # "not installed": importing it raises ModuleNotFoundError
from coordinator.cli import main
try:
    main(sys.argv[2:], prog_name="txcoord")
except SystemExit as exit:
    code = exit.code
print("imported:", sorted(m for m in sys.modules if m.startswith("coordinator.commands.")
                          or m == "pyspark"))
sys.exit(code)
"""


def txcoord(*args: str, hidden: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", RUN, hidden, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize("name", list(COMMANDS))
def test_each_summary_is_the_first_sentence_of_its_commands_help(name: str) -> None:
    command = getattr(importlib.import_module(f"coordinator.commands.{name}"), name)
    assert COMMANDS[name] == command.get_short_help_str(limit=1000)


def test_help_lists_every_command_and_imports_none() -> None:
    run = txcoord("--help")
    assert run.returncode == 0, run.stderr
    for name, summary in COMMANDS.items():
        assert f"  {name} " in run.stdout and summary.split()[0] in run.stdout, run.stdout
    assert "imported: []" in run.stdout  # no command module, no Spark


def test_a_command_runs_only_its_own_module() -> None:
    run = txcoord("demo", "--help")
    assert run.returncode == 0, run.stderr
    assert "imported: ['coordinator.commands.demo']" in run.stdout


def test_a_command_without_its_packages_is_refused_in_one_line() -> None:
    run = txcoord("up", "--port", "1", hidden="pyspark")
    assert run.returncode == 1
    assert run.stderr.strip() == (
        "Error: txcoord up needs the engine's packages (pyspark is not "
        "installed): pip install 'txcoord[engine]'"
    )
    listed = txcoord("--help", hidden="pyspark")
    assert listed.returncode == 0 and "  up " in listed.stdout, listed.stderr


def test_a_missing_module_of_txcoord_itself_is_not_called_a_missing_extra() -> None:
    run = txcoord("up", hidden="streams")
    assert run.returncode != 0
    assert "ModuleNotFoundError" in run.stderr and "txcoord[engine]" not in run.stderr
    assert "streams" in OWN_PACKAGES
