"""`txcoord up --cluster` gives up on a coordinator that does not start: a hang signal.

The profile waits START_BOUND for the coordinator to say it runs (about 50 s on an idle 2-core
host, 60 s beside a CPU hog); past it, `up` stops with an error that names what did not
start, the bound, and how a slower host gives it longer (`--start-timeout`, for `--cluster`
only). The full start is tests/coordinator/runtime/local_stack/test_cluster_profile.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from coordinator.commands.up import up
from coordinator.core.errors import StackError
from coordinator.runtime.local_stack.cluster_profile import (
    RUNNING,
    START_BOUND,
    START_HINT,
    ClusterProfile,
    ProfileSettings,
)


def test_a_coordinator_silent_past_the_bound_stops_the_start_with_the_bound_and_the_remedy(
    tmp_path: Path,
) -> None:
    settings = ProfileSettings(tmp_path / "cluster", start_bound=1.0)
    profile = ClusterProfile(settings, None, {})
    profile.logs.mkdir(parents=True)
    hung = profile._spawn("coordinator", ["sleep", "60"])  # runs, never says it does
    try:
        with pytest.raises(StackError) as raised:
            profile._wait_for_log("coordinator", RUNNING, settings.start_bound, START_HINT)
    finally:
        hung.kill()
        hung.wait()
    message = str(raised.value)
    assert "the coordinator did not say 'txcoord coordinator running'" in message, message
    assert "start bound of 1 s" in message and "--start-timeout SECONDS" in message, message


def test_an_exit_before_the_bound_is_told_as_an_exit(tmp_path: Path) -> None:
    profile = ClusterProfile(ProfileSettings(tmp_path / "cluster"), None, {})
    profile.logs.mkdir(parents=True)
    profile._spawn("coordinator", ["sh", "-c", "echo no spark here; exit 3"]).wait()
    with pytest.raises(StackError, match=r"the coordinator exited; .*\n.*no spark here"):
        profile._wait_for_log("coordinator", RUNNING, 60, START_HINT)


def test_start_timeout_is_the_cluster_profiles_and_defaults_to_the_bound() -> None:
    runner = CliRunner()
    alone = runner.invoke(up, ["--start-timeout", "600", "--state-dir", "unused"])
    assert alone.exit_code == 2 and "--start-timeout is for --cluster" in alone.output
    shown = runner.invoke(up, ["--help"], terminal_width=200)
    assert f"[default: {START_BOUND:.0f};" in " ".join(shown.output.split()), shown.output
    assert START_BOUND <= 300  # a hang signal: the profile's start takes about 60 s loaded
