"""A listener's answer: an exception, None or anything not a state counts as UNKNOWN."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from coordinator.sdk import CheckRequest, LocalTransactionState, Message, TransactionListener
from coordinator.sdk.listener import decide

State = LocalTransactionState


def test_a_state_is_returned_as_is() -> None:
    assert decide(lambda: State.COMMIT_MESSAGE, "execute", "tx") is State.COMMIT_MESSAGE
    assert decide(lambda: State.ROLLBACK_MESSAGE, "execute", "tx") is State.ROLLBACK_MESSAGE
    assert decide(lambda: State.UNKNOW, "execute", "tx") is State.UNKNOWN


def test_none_counts_as_unknown() -> None:
    assert decide(lambda: None, "execute", "tx") is State.UNKNOWN


def test_an_exception_counts_as_unknown_and_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    def boom() -> State:
        raise RuntimeError("database down")

    with caplog.at_level(logging.ERROR, logger="coordinator.sdk.listener"):
        assert decide(boom, "check_local_transaction", "tx-9") is State.UNKNOWN
    (record,) = caplog.records
    assert "check_local_transaction of transaction tx-9 raised" in record.getMessage()
    assert record.exc_info is not None and "database down" in str(record.exc_info[1])


@pytest.mark.parametrize("junk", ["COMMIT_MESSAGE", True, 1])
def test_a_value_that_is_not_a_state_counts_as_unknown(
    junk: object, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="coordinator.sdk.listener"):
        assert decide(lambda: junk, "execute_local_transaction", "tx") is State.UNKNOWN
    assert "not a LocalTransactionState" in caplog.text


def test_the_listener_is_abstract() -> None:
    class Half(TransactionListener):
        def execute_local_transaction(self, msg: Message, arg: Any) -> State:
            return State.COMMIT_MESSAGE

    with pytest.raises(TypeError, match="check_local_transaction"):
        Half()  # type: ignore[abstract]

    class Whole(Half):
        def check_local_transaction(self, msg: CheckRequest) -> State:
            return State.ROLLBACK_MESSAGE

    assert isinstance(Whole(), TransactionListener)
