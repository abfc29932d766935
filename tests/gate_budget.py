"""The gate's time budget (tests/budget.toml): the order modules are handed out in, and the
warnings a run prints when it ran long.

The budget is in minutes on 2 cores. A module over 1.5 x its budget, or a run over the
whole budget, gets a warning line at the end of the run; timing never fails the gate (a
slower host comes often), but a module that has grown is seen the day it grew.
"""

from __future__ import annotations

import json
import time
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import pytest

BUDGET_FILE = Path(__file__).with_name("budget.toml")
#: Every module's time in the last run (seconds, longest first), where the budget file's
#: numbers and the next cut come from: the summary prints only the ten longest.
TIMES_FILE = Path(__file__).parents[1] / ".cache" / "gate-times.json"
#: A module over this many times its budget is reported.
OVER = 1.5
#: The budget of a module not marked `long` (seconds, not minutes).
UNLISTED = 0.5
#: Slowest tests listed at the end of the run.
SLOWEST = 25


@dataclass(frozen=True)
class Budget:
    """Minutes per `long` module (by path from the checkout's root), and for a whole run."""

    modules: dict[str, float]
    whole_minutes: float

    @classmethod
    def load(cls, path: Path = BUDGET_FILE) -> Budget:
        """Read the budget file."""
        data = tomllib.loads(path.read_text())
        return cls({str(k): float(v) for k, v in data["modules"].items()}, data["whole_minutes"])

    def minutes(self, module: str) -> float:
        """Return a module's budget (0: not a long module: seconds)."""
        return self.modules.get(module, 0.0)


def module_of(nodeid: str) -> str:
    """Return the module path of a test id ("tests/test_budget.py::test_z[1]")."""
    return nodeid.split("::", 1)[0]


@dataclass(eq=False)  # a plugin: pytest keeps its plugins in sets
class GateClock:
    """Sums each module's test time as reports arrive (from every xdist worker), and says
    at the end what ran over its budget."""

    budget: Budget
    started: float = field(default_factory=time.monotonic)
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    #: The guarantee tests' application starts (seconds, master) and unplanned exits.
    starts: list[tuple[float, str, str]] = field(default_factory=list)
    unplanned: list[tuple[str, str]] = field(default_factory=list)

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Count a phase's time (setup, call, teardown) to its module; keep the application
        runs a test recorded (tests/guarantees/conftest.py: on its teardown's report)."""
        self.seconds[module_of(report.nodeid)] += report.duration
        if report.when != "teardown":
            return
        for name, entries in report.user_properties:
            if name != "app_runs":
                continue
            for entry in entries:
                if "start_seconds" in entry:
                    self.starts.append((entry["start_seconds"], entry["master"], report.nodeid))
                else:
                    self.unplanned.append((str(entry["unplanned"]), report.nodeid))

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """Print the longest modules against their budgets, and the warnings."""
        wall = time.monotonic() - self.started
        lines = self.report(wall)
        terminalreporter.section("gate time (tests/budget.toml)")
        for line in lines:
            terminalreporter.write_line(line)
        self.save(wall)
        terminalreporter.write_line(f"every module's time: {TIMES_FILE}")

    def save(self, wall_seconds: float, path: Path = TIMES_FILE) -> None:
        """Write every module's time, longest first, and the run's wall time."""
        path.parent.mkdir(parents=True, exist_ok=True)
        modules = dict(sorted(self.seconds.items(), key=lambda item: -item[1]))
        rounded = {module: round(seconds, 1) for module, seconds in modules.items()}
        path.write_text(json.dumps({"wall_seconds": round(wall_seconds), "modules": rounded}))

    def report(self, wall_seconds: float) -> list[str]:
        """Return the summary's lines: the ten longest modules, then every warning."""
        lines = []
        longest = sorted(self.seconds.items(), key=lambda item: -item[1])[:10]
        for module, seconds in longest:
            budget = self.budget.minutes(module)
            lines.append(f"{seconds / 60:6.1f} min  (budget {budget:4.1f})  {module}")
        for module, seconds in sorted(self.seconds.items()):
            budget = self.budget.minutes(module) or UNLISTED  # not a long module: seconds
            if seconds / 60 > OVER * budget:
                lines.append(
                    f"WARNING gate: {module} took {seconds / 60:.1f} min, over {OVER} x its "
                    f"budget of {budget} min (tests/budget.toml)"
                )
        lines += self.app_runs()
        if wall_seconds / 60 > self.budget.whole_minutes:
            lines.append(
                f"WARNING gate: the tests took {wall_seconds / 60:.1f} min, over the whole "
                f"gate's budget of {self.budget.whole_minutes} min (install and lint not counted)"
            )
        return lines

    def app_runs(self) -> list[str]:
        """Return the application starts' longest per master, and every unplanned exit: the
        figures the start bounds (tests/guarantees/app_runs.py START_BOUND on local[2],
        CLUSTER_START_BOUND on the standalone cluster: two to three times the longest start
        beside a CPU hog) and the accepted exit causes are set from."""
        lines = []
        for master in sorted({m for _, m, _ in self.starts}):
            times = sorted(s for s, m, _ in self.starts if m == master)
            longest = max((s, n) for s, m, n in self.starts if m == master)
            lines.append(
                f"application starts on {master}: {len(times)}, median {times[len(times) // 2]} s,"
                f" longest {longest[0]} s ({longest[1]})"
            )
        lines += [f"unplanned exit in {nodeid}: {entry}" for entry, nodeid in self.unplanned]
        return lines
