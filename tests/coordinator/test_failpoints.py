"""Failpoints: parsing, and doing nothing unless armed for exactly that pass."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from core import failpoints
from core.errors import ConfigurationError


@pytest.fixture(autouse=True)
def disarmed() -> Iterator[None]:
    yield
    failpoints.arm("")


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
    frozen.join(1.0)
    assert frozen.is_alive()  # the second pass stops moving
    assert "FAILPOINT x reached" in capsys.readouterr().out


def test_failpoints_armed_together_freeze_in_the_order_given(
    capsys: pytest.CaptureFixture[str],
) -> None:
    failpoints.arm("first=1,second=1")
    early = threading.Thread(target=failpoints.failpoint, args=("second",), daemon=True)
    early.start()
    early.join(1.0)
    assert not early.is_alive()  # not counted: "first" has not frozen yet
    first = threading.Thread(target=failpoints.failpoint, args=("first",), daemon=True)
    first.start()
    first.join(1.0)
    assert first.is_alive()
    second = threading.Thread(target=failpoints.failpoint, args=("second",), daemon=True)
    second.start()
    second.join(1.0)
    assert second.is_alive()  # its first pass counted after "first" froze
    out = capsys.readouterr().out
    assert out.index("FAILPOINT first reached") < out.index("FAILPOINT second reached")
