"""Failpoints: parsing, and doing nothing unless armed for exactly that pass."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from coordinator.core import failpoints
from coordinator.core.errors import ConfigurationError


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    yield
    failpoints.arm("")


def printed(capsys: pytest.CaptureFixture[str], line: str, before: str = "") -> str:
    """Return what was printed (after `before`), once `line` is in it: the positive marker
    that a thread reached its failpoint, however late a loaded machine ran it."""
    out, deadline = before, time.monotonic() + 60
    while line not in out:
        assert time.monotonic() < deadline, f"{line!r} never printed: {out!r}"
        time.sleep(0.01)
        out += capsys.readouterr().out
    return out


def test_parse_reads_name_count_pairs() -> None:
    assert failpoints.parse(" a.b=2, c=1 ,") == {"a.b": 2, "c": 1}
    assert failpoints.parse("") == {}


@pytest.mark.parametrize("spec", ["a", "a=", "a=0", "a=-1", "a=x"])
def test_parse_refuses_what_it_cannot_read(spec: str) -> None:
    with pytest.raises(ConfigurationError, match="--failpoint"):
        failpoints.parse(spec)


def test_unarmed_and_other_passes_return_and_the_armed_pass_freezes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    failpoint = failpoints.failpoint
    failpoint("x")  # nothing armed
    failpoints.arm("x=2")
    failpoint("y")
    failpoint("x")  # first pass: not yet
    frozen = threading.Thread(target=failpoint, args=("x",), daemon=True)
    frozen.start()
    printed(capsys, "FAILPOINT x reached")
    frozen.join(1.0)  # a pass that printed, then returned, would end in this second
    assert frozen.is_alive()  # the second pass stops moving


def test_failpoints_armed_together_freeze_in_the_order_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    failpoints.arm("first=1,second=1")
    early = threading.Thread(target=failpoints.failpoint, args=("second",), daemon=True)
    early.start()
    early.join(60)  # returns at once; a frozen one would still be there after this
    assert not early.is_alive()  # not counted: "first" has not frozen yet
    first = threading.Thread(target=failpoints.failpoint, args=("first",), daemon=True)
    first.start()
    out = printed(capsys, "FAILPOINT first reached")  # frozen, before "second" passes
    second = threading.Thread(target=failpoints.failpoint, args=("second",), daemon=True)
    second.start()
    out = printed(capsys, "FAILPOINT second reached", out)  # its first pass counted
    first.join(1.0)
    second.join(1.0)
    assert first.is_alive() and second.is_alive()  # both stop moving
    assert out.index("FAILPOINT first reached") < out.index("FAILPOINT second reached")
