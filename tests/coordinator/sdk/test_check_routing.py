"""The partition owner's side of sender-first routing: hold, claim, come due, move away."""

from __future__ import annotations

from dataclasses import replace

from coordinator.protocol.check_claim import CheckClaim
from coordinator.protocol.ingress import PRODUCER_GROUP, PRODUCER_INSTANCE
from coordinator.sdk.check_routing import HeldChecks, addressed_to
from coordinator.sdk.message import CheckRequest

from .helpers import check_request


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def for_instance(
    tx: str, instance: str | None, number: int = 1, partition: int = 0
) -> CheckRequest:
    request = check_request(tx, number, offset=number)
    return replace(request, producer_instance=instance, source=("checks", partition, number))


def claim(tx: str, instance: str, number: int = 1) -> CheckClaim:
    return CheckClaim(tx, number, "orders", instance)


def test_checks_for_this_instance_or_nobody_are_not_held() -> None:
    held = HeldChecks("me", 2.0)
    assert not held.hold(for_instance("t1", "me"))
    assert not held.hold(for_instance("t2", None))
    assert held.hold(for_instance("t3", "other"))
    assert len(held) == 1


def test_a_zero_delay_holds_nothing() -> None:
    assert not HeldChecks("me", 0.0).hold(for_instance("t1", "other"))


def test_a_held_check_comes_due_after_the_delay_in_order() -> None:
    clock = Clock()
    held = HeldChecks("me", 2.0, clock)
    first, second = for_instance("t1", "x"), for_instance("t2", "y")
    held.hold(first)
    clock.now += 1
    held.hold(second)
    assert held.due(10) == []
    clock.now += 1
    assert held.due(10) == [first]
    clock.now += 1
    assert held.due(10) == [second]
    assert len(held) == 0


def test_due_returns_at_most_the_limit_and_keeps_the_rest() -> None:
    clock = Clock()
    held = HeldChecks("me", 1.0, clock)
    checks = [for_instance(f"t{i}", "x") for i in range(5)]
    for check in checks:
        held.hold(check)
    clock.now += 5
    assert held.due(2) == checks[:2]
    assert held.due(0) == []
    assert held.due(10) == checks[2:]


def test_a_claim_by_the_addressee_releases_every_copy() -> None:
    clock = Clock()
    held = HeldChecks("me", 2.0, clock)
    copy1, copy2 = for_instance("t1", "x", partition=0), for_instance("t1", "x", partition=1)
    held.hold(copy1)
    held.hold(copy2)
    assert held.claimed(claim("t1", "x")) == [copy1, copy2]
    clock.now += 10
    assert held.due(10) == []


def test_a_claim_by_another_instance_or_of_another_check_number_releases_nothing() -> None:
    clock = Clock()
    held = HeldChecks("me", 2.0, clock)
    check = for_instance("t1", "x", number=1)
    held.hold(check)
    assert held.claimed(claim("t1", "intruder")) == []
    assert held.claimed(claim("t1", "x", number=2)) == []
    clock.now += 2
    assert held.due(10) == [check]


def test_checks_of_partitions_moved_away_are_forgotten() -> None:
    clock = Clock()
    held = HeldChecks("me", 2.0, clock)
    kept, moved = for_instance("t1", "x", partition=0), for_instance("t2", "x", partition=1)
    held.hold(kept)
    held.hold(moved)
    held.retain([("checks", 0)])
    clock.now += 2
    assert held.due(10) == [kept]


def test_the_senders_reader_picks_its_groups_checks_for_it_by_header() -> None:
    mine = [(PRODUCER_GROUP, b"orders"), (PRODUCER_INSTANCE, b"me")]
    assert addressed_to("me", "orders", mine)
    assert not addressed_to("me", "billing", mine)
    assert not addressed_to("you", "orders", mine)
    assert not addressed_to("me", "orders", [(PRODUCER_GROUP, b"orders")])
    assert not addressed_to("me", "orders", None)
