"""Listeners and check requests shared by the SDK tests."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from coordinator.sdk import CheckRequest, LocalTransactionState, Message, TransactionListener

State = LocalTransactionState


def check_request(
    transaction_id: str, check_number: int = 1, group: str = "orders", offset: int = 0
) -> CheckRequest:
    """Return a check request as a transport would hand it out."""
    return CheckRequest(
        transaction_id=transaction_id,
        msg_id="M",
        producer_group=group,
        topic="OrderPaid",
        queue_id=0,
        body=b"body",
        keys=("k",),
        tags=None,
        properties={},
        check_number=check_number,
        source=("checks", 0, offset),
    )


class RecordingListener(TransactionListener):
    """Answer with fixed states (or call `check` if given) and record every call."""

    def __init__(
        self,
        execute: State | None = State.COMMIT_MESSAGE,
        check: Callable[[CheckRequest], State | None] | None = None,
        delay: float = 0.0,
    ) -> None:
        self.execute = execute
        self.check = check
        self.delay = delay
        self.executed: list[tuple[Message, Any]] = []
        self.checked: list[CheckRequest] = []
        self.lock = threading.Lock()

    def execute_local_transaction(self, msg: Message, arg: Any) -> State | None:
        with self.lock:
            self.executed.append((msg, arg))
        return self.execute

    def check_local_transaction(self, msg: CheckRequest) -> State | None:
        if self.delay:
            time.sleep(self.delay)
        with self.lock:
            self.checked.append(msg)
        return self.check(msg) if self.check else State.COMMIT_MESSAGE

    def check_counts(self) -> Counter[tuple[str, int]]:
        """Return how often each (transaction_id, check_number) was asked."""
        with self.lock:
            return Counter(r.key for r in self.checked)


def wait_until(condition: Callable[[], bool], timeout: float = 30.0, what: str = "") -> None:
    """Poll `condition` until it holds; fail with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or condition}")
        time.sleep(0.02)
