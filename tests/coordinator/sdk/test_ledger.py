"""CheckLedger: each (transaction_id, check_number) is answered once while remembered."""

from __future__ import annotations

from coordinator.sdk.ledger import Admission, CheckLedger
from coordinator.sdk.message import CheckRequest


def request(transaction_id: str, check_number: int, offset: int = 0) -> CheckRequest:
    return CheckRequest(
        transaction_id=transaction_id,
        msg_id="M",
        producer_group="g",
        topic="T",
        queue_id=0,
        body=b"",
        keys=(),
        tags=None,
        properties={},
        check_number=check_number,
        source=("checks", 0, offset),
    )


def test_the_first_copy_is_new_and_a_copy_in_flight_waits_for_it() -> None:
    ledger = CheckLedger()
    first, copy = request("a", 1, offset=0), request("a", 1, offset=9)
    assert ledger.admit(first) is Admission.NEW
    assert ledger.admit(copy) is Admission.IN_FLIGHT
    assert ledger.answered(first.key) == [copy]
    assert ledger.in_flight() == 0


def test_a_copy_after_the_answer_is_answered_already() -> None:
    ledger = CheckLedger()
    ledger.admit(request("a", 1))
    ledger.answered(("a", 1))
    assert ledger.admit(request("a", 1)) is Admission.ANSWERED
    assert ("a", 1) in ledger


def test_a_later_check_number_is_a_new_request() -> None:
    ledger = CheckLedger()
    ledger.admit(request("a", 1))
    ledger.answered(("a", 1))
    assert ledger.admit(request("a", 2)) is Admission.NEW


def test_an_abandoned_request_is_new_again_and_returns_its_copies() -> None:
    ledger = CheckLedger()
    ledger.admit(request("a", 1))
    ledger.admit(request("a", 1, offset=4))
    assert [r.source for r in ledger.abandoned(("a", 1))] == [("checks", 0, 4)]
    assert ledger.admit(request("a", 1)) is Admission.NEW


def test_answered_keys_are_bounded_least_recently_used_first() -> None:
    ledger = CheckLedger(capacity=2)
    for name in ("a", "b"):
        ledger.admit(request(name, 1))
        ledger.answered((name, 1))
    assert ledger.admit(request("a", 1)) is Admission.ANSWERED  # touches a: b is now oldest
    ledger.admit(request("c", 1))
    ledger.answered(("c", 1))
    assert ("b", 1) not in ledger
    assert ("a", 1) in ledger
    assert ("c", 1) in ledger
