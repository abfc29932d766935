"""The coordinator application's exit codes, as a supervisor sees them (coordinator/app.py).

The defaults tell a fenced driver (3) from a clean stop (0) and an error (2); a supervisor
that tells only zero from non-zero (the Spark operator's OnFailure, deploy/k8s/) is given a
fenced driver's run as finished and a drained one's as failed, so that it restarts the one
and not the other. The engine itself is replaced here: what it does when fenced or stopped
is the engine tests' (tests/streams/fence/, tests/coordinator/test_app.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from coordinator import app
from coordinator.core.config import Config
from coordinator.core.errors import TxcoordError, WriterFencedError


class _Signals:
    """StopSignals without touching this process's handlers."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.hurry = threading.Event()

    def install(self) -> _Signals:
        return self


def _ends(outcome: BaseException | None) -> Callable[[Config, object], None]:
    def run(config: Config, signals: object) -> None:
        if outcome is not None:
            raise outcome

    return run


@pytest.mark.parametrize(
    ("argv", "outcome", "code"),
    [
        ([], WriterFencedError("a newer coordinator took over"), 3),
        ([], None, 0),
        ([], TxcoordError("the broker went away"), 2),
        (["--fenced-exit-code", "0", "--stopped-exit-code", "143"], WriterFencedError("x"), 0),
        (["--fenced-exit-code", "0", "--stopped-exit-code", "143"], None, 143),
        (["--fenced-exit-code", "0", "--stopped-exit-code", "143"], TxcoordError("x"), 2),
    ],
)
def test_each_end_leaves_with_its_code(
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    outcome: BaseException | None,
    code: int,
) -> None:
    monkeypatch.setattr(app, "StopSignals", _Signals)
    monkeypatch.setattr(app, "run", _ends(outcome))
    assert app.main(argv) == code


@pytest.mark.parametrize("value", ["-1", "256", "three", ""])
def test_an_exit_code_outside_0_to_255_is_refused(value: str) -> None:
    with pytest.raises(SystemExit) as refused:
        app.parse_args(["--fenced-exit-code", value])
    assert refused.value.code == 2
