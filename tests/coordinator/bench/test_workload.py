"""The mix deals kinds in proportion, and transaction ids carry their kind."""

from __future__ import annotations

from collections import Counter
from itertools import islice

import pytest

from coordinator.bench.workload import DEFAULT_MIX, KINDS, Mix, kind_of, transaction_id


def test_default_mix_is_the_issues_mix() -> None:
    assert Mix.parse(DEFAULT_MIX).as_dict() == {
        "commit": 0.80, "rollback": 0.10, "checked-commit": 0.05, "checked-rollback": 0.05,
    }  # fmt: skip


@pytest.mark.parametrize("prefix", [20, 200, 1000])
def test_every_prefix_follows_the_mix(prefix: int) -> None:
    dealt = Counter(kind.name for kind in islice(Mix.parse(DEFAULT_MIX).kinds(), prefix))
    for name, share in Mix.parse(DEFAULT_MIX).as_dict().items():
        assert abs(dealt[name] - share * prefix) <= 1


def test_zero_weights_are_dropped_and_repeats_add_up() -> None:
    mix = Mix.parse("commit=1, rollback=0, commit=2")
    assert mix.weights == (("commit", 3),)
    assert not mix.has_checked
    assert Mix.parse("checked-commit=1").has_checked


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "at least one kind"),
        ("commit", "kind=weight"),
        ("commit=x", "integer"),
        ("commit=-1", "negative"),
        ("maybe=3", "unknown kind"),
    ],
)
def test_bad_mixes_are_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Mix.parse(text)


@pytest.mark.parametrize("kind", KINDS.values(), ids=list(KINDS))
def test_a_transaction_id_carries_its_kind(kind: object) -> None:
    tx = transaction_id("b20250101T000000Z-kafka", 42, KINDS[kind.name])  # type: ignore[attr-defined]
    assert kind_of(tx) == kind
    assert len(tx) <= 128


def test_other_ids_have_no_kind() -> None:
    assert kind_of("3f2a9c") is None
    assert kind_of("orders-17-x") is None


def test_checked_kinds_answer_their_check_with_their_decision() -> None:
    assert KINDS["checked-commit"].first_op == "UNKNOWN"
    assert KINDS["checked-commit"].check_answer == "COMMIT"
    assert KINDS["checked-rollback"].expected_state == "ROLLED_BACK"
    assert not KINDS["commit"].checked
