"""The mix deals kinds in proportion, and transaction ids carry their kind."""

from __future__ import annotations

from collections import Counter
from itertools import islice

import pytest

from coordinator.bench.workload import DEFAULT_MIX, KINDS, Kind, Mix, kind_of, transaction_id


def test_default_mix_is_the_issues_mix() -> None:
    assert Mix.parse(DEFAULT_MIX).as_dict() == {
        "commit": 0.80, "rollback": 0.10, "checked-commit": 0.04, "checked-rollback": 0.04,
        "rechecked-commit": 0.02,
    }  # fmt: skip


def test_a_run_of_200_has_every_kind_of_the_default_mix() -> None:
    """The bench's smoke run sends 200 per path: enough for rechecked transactions too."""
    dealt = Counter(kind.name for kind in islice(Mix.parse(DEFAULT_MIX).kinds(), 200))
    assert dealt == {
        "commit": 160,
        "rollback": 20,
        "checked-commit": 8,
        "checked-rollback": 8,
        "rechecked-commit": 4,
    }


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
    assert Mix.parse("rechecked-commit=1").has_checked


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


DECIDED_AT_FIRST = [kind for name, kind in KINDS.items() if name != "rechecked-commit"]


@pytest.mark.parametrize("kind", DECIDED_AT_FIRST, ids=[k.name for k in DECIDED_AT_FIRST])
def test_every_kind_but_the_rechecked_one_decides_at_its_first_check(kind: Kind) -> None:
    assert kind.answer(1) == kind.answer(2) == kind.answer(3) == kind.check_answer
    assert kind.decided_at_check == 1


def test_the_rechecked_kind_answers_unknown_then_commits_at_the_second_check() -> None:
    kind = KINDS["rechecked-commit"]
    assert kind.checked and kind.first_op == "UNKNOWN"
    assert [kind.answer(n) for n in (1, 2, 3)] == ["UNKNOWN", "COMMIT", "COMMIT"]
    assert kind.expected_state == "COMMITTED"
    assert kind_of(transaction_id("b1-kafka", 7, kind)) == kind
    assert len({k.code for k in KINDS.values()}) == len(KINDS)  # every id names one kind
