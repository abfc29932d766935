"""Answer the coordinator's check requests in the background, without ever storming.

Threads: one poller takes requests from the transport into a bounded queue; a fixed pool
of workers asks the listener (`check_local_transaction`) and sends the answer as an op
with from_check=True. RocketMQ's check storms (apache/rocketmq#1519, #1544) came from
work piling up without bound while the check executor was full; here nothing piles up:

- backpressure: the poller asks the transport for at most the free room of the queue, and
  for nothing while it is full (the requests stay in the check topic or the ingress), with
  a warning when that starts and a note when it ends. No request is dropped or refused;
- duplicates: a (transaction_id, check_number) in flight or answered recently is not
  answered again (coordinator/sdk/ledger.py);
- failures: polling and answering retry with exponential backoff and jitter; an answer the
  ingress refuses (4xx) is logged and not retried.

Answers are sent together: a worker that has an answer puts it in an outbox and, unless
another worker is already sending, sends everything the outbox holds in one call of the
transport's `send_ops` (one produce request for many answers on Kafka: a tenth of the CPU
per answer of one send each) and goes on until the outbox is empty; while one worker waits
for the broker, the others go on asking the listener. A transport without `send_ops` is
sent to one answer at a time. The outbox holds at most `queue_size` answers: a worker with
an answer waits for room, so a broker that refuses everything still stops the poller.

A request is acknowledged to the transport (for Kafka: its offset may be committed) only
after its answer was sent. At shutdown the queue is drained for up to the timeout; what
is left is abandoned unanswered and unacknowledged, so another producer of the group (or
the coordinator's next check) asks again.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass

from coordinator.core.backoff import Backoff
from coordinator.sdk.errors import SdkError
from coordinator.sdk.ledger import Admission, CheckLedger
from coordinator.sdk.listener import TransactionListener, decide
from coordinator.sdk.message import CheckRequest
from coordinator.sdk.state import LocalTransactionState
from coordinator.sdk.transport import OpReceipt, SendsOps, Transport

log = logging.getLogger(__name__)

#: While the queue is full, how often the poller keeps the transport's session alive.
KEEPALIVE_SECONDS = 1.0
#: At most one "queue full" warning per this many seconds: a small queue fills many times.
FULL_WARNING_INTERVAL_SECONDS = 60.0
#: At most this many answers in one `send_ops` call.
ANSWER_BATCH = 500

#: An answer waiting to be sent: the request and the listener's state.
Answer = tuple[CheckRequest, LocalTransactionState]


@dataclass(frozen=True)
class CheckStats:
    """Counters of the check loop since start."""

    taken: int = 0  # requests admitted into the queue
    answered: int = 0  # answers sent
    duplicates: int = 0  # copies of a request in flight or answered recently, not re-answered
    refused: int = 0  # answers the ingress refused (4xx), not retried
    abandoned: int = 0  # left unanswered (shutdown, or a full queue): delivered or checked again
    queued: int = 0  # in the queue now
    high_water: int = 0  # most requests ever queued at once


class CheckAnswerer:
    """The poller, the bounded queue and the workers; see the module docstring."""

    def __init__(
        self,
        transport: Transport,
        listener: TransactionListener,
        group: str,
        *,
        workers: int = 2,
        queue_size: int = 1000,
        poll_wait_seconds: float = 2.0,
        poll_batch: int = 100,
        ledger_capacity: int = 10_000,
    ) -> None:
        """Prepare the loop; nothing runs until `start()`."""
        if workers < 1:
            raise ValueError(f"check_workers must be >= 1, not {workers}")
        if queue_size < 1:
            raise ValueError(f"check_queue_size must be >= 1, not {queue_size}")
        if poll_batch < 1:
            raise ValueError(f"poll_batch must be >= 1, not {poll_batch}")
        self._transport = transport
        self._listener = listener
        self._group = group
        self._poll_wait = poll_wait_seconds
        self._poll_batch = poll_batch
        self._ledger = CheckLedger(ledger_capacity)
        self._queue: queue.Queue[CheckRequest] = queue.Queue(maxsize=queue_size)
        self._stopping = threading.Event()  # poller: take nothing more
        self._closing = threading.Event()  # workers: abandon what is left
        self._room = threading.Event()  # a worker took a request off the queue
        self._counts = {
            name: 0
            for name in ("taken", "answered", "duplicates", "refused", "abandoned", "high_water")
        }
        self._counts_lock = threading.Lock()
        # Answers decided and not sent yet; the worker holding _sending sends them.
        self._outbox: list[Answer] = []
        self._outbox_size = queue_size
        self._outbox_changed = threading.Condition()
        self._sending = threading.Lock()
        self._full_since: float | None = None
        self._full_warned_at: float | None = None
        self._poller = threading.Thread(
            target=self._poll_loop, name=f"txcoord-check-poller-{group}", daemon=True
        )
        self._workers = [
            threading.Thread(
                target=self._work_loop, name=f"txcoord-check-worker-{group}-{i}", daemon=True
            )
            for i in range(workers)
        ]
        self._started = False
        self._stopped = False
        self._lifecycle = threading.Lock()

    def _count(self, name: str, by: int = 1) -> None:
        with self._counts_lock:
            self._counts[name] += by

    def stats(self) -> CheckStats:
        """Return a snapshot of the counters."""
        with self._counts_lock:
            return CheckStats(queued=self._queue.qsize(), **self._counts)

    def start(self) -> None:
        """Start the poller and the workers."""
        with self._lifecycle:
            if self._started:
                return
            self._started = True
        for worker in self._workers:
            worker.start()
        self._poller.start()

    # -- the poller ---------------------------------------------------------------------
    def _poll_loop(self) -> None:
        backoff = Backoff(initial=0.5, maximum=30.0)
        while not self._stopping.is_set():
            room = self._queue.maxsize - self._queue.qsize()
            if room <= 0:
                self._note_full()
                self._room.clear()
                if self._queue.qsize() >= self._queue.maxsize:
                    self._room.wait(KEEPALIVE_SECONDS)
                if self._stopping.is_set():
                    break
                if self._queue.qsize() >= self._queue.maxsize:
                    self._keep_alive()
                continue
            self._note_room()
            started = time.monotonic()
            try:
                requests = self._transport.poll_checks(min(room, self._poll_batch), self._poll_wait)
            except Exception as exc:
                delay = backoff.next_delay()
                log.warning(
                    "polling check requests of group %s failed (%s); retrying in %.1fs",
                    self._group,
                    exc,
                    delay,
                )
                self._stopping.wait(delay)
                continue
            backoff.reset()
            for request in requests:
                self._admit(request)
            if not requests:
                # A transport that returns at once with nothing (a rebalance, an ingress that
                # ignores the wait) must not turn this loop into a busy one.
                early = self._poll_wait - (time.monotonic() - started)
                if early > 0:
                    self._stopping.wait(min(early, 1.0))

    def _keep_alive(self) -> None:
        try:
            self._transport.poll_checks(0, 0)
        except Exception as exc:
            log.warning("keeping the check transport alive failed: %s", exc)

    def _note_full(self) -> None:
        if self._full_since is not None:
            return
        now = self._full_since = time.monotonic()
        last = self._full_warned_at
        if last is not None and now - last < FULL_WARNING_INTERVAL_SECONDS:
            return
        self._full_warned_at = now
        log.warning(
            "check queue of group %s is full (%d waiting): taking no more check requests "
            "until a worker frees a slot; the rest wait in the transport (not dropped)",
            self._group,
            self._queue.maxsize,
        )

    def _note_room(self) -> None:
        if self._full_since is not None:
            waited = time.monotonic() - self._full_since
            level = logging.INFO if waited >= KEEPALIVE_SECONDS else logging.DEBUG
            log.log(
                level, "check queue of group %s has room again after %.1fs", self._group, waited
            )
            self._full_since = None

    def _admit(self, request: CheckRequest) -> None:
        if request.producer_group != self._group:
            log.warning(
                "ignoring check request of group %s (this producer is %s)",
                request.producer_group,
                self._group,
            )
            self._transport.acknowledge(request)
            return
        admission = self._ledger.admit(request)
        if admission is Admission.ANSWERED:
            self._count("duplicates")
            self._transport.acknowledge(request)
            return
        if admission is Admission.IN_FLIGHT:
            self._count("duplicates")  # acknowledged together with the first copy
            return
        try:
            self._queue.put_nowait(request)
        except queue.Full:
            # Only when a transport returns more than asked; still not a silent drop.
            self._abandon(request)
            log.warning(
                "check queue full: check %d of %s left unanswered; it is delivered or "
                "checked again",
                request.check_number,
                request.transaction_id,
            )
            return
        with self._counts_lock:
            self._counts["taken"] += 1
            self._counts["high_water"] = max(self._counts["high_water"], self._queue.qsize())

    # -- the workers --------------------------------------------------------------------
    def _work_loop(self) -> None:
        while True:
            try:
                request = self._queue.get(timeout=0.1)
            except queue.Empty:
                if self._closing.is_set():
                    return
                continue
            self._room.set()
            if self._closing.is_set():
                self._abandon(request)
                self._queue.task_done()
                continue
            try:
                self._post((request, self._ask(request)))
            except Exception:  # not expected (_post settles each answer itself): keep the worker
                log.exception(
                    "check %d of %s failed unexpectedly",
                    request.check_number,
                    request.transaction_id,
                )

    def _ask(self, request: CheckRequest) -> LocalTransactionState:
        return decide(
            lambda: self._listener.check_local_transaction(request),
            "check_local_transaction",
            request.transaction_id,
        )

    def _post(self, answer: Answer) -> None:
        """Put `answer` in the outbox (waiting for room), then send unless a worker is."""
        with self._outbox_changed:
            while len(self._outbox) >= self._outbox_size:
                self._outbox_changed.wait(0.1)
            self._outbox.append(answer)
        while self._sending.acquire(blocking=False):
            try:
                while batch := self._take_answers():
                    self._send_answers(batch)
            finally:
                self._sending.release()
            with self._outbox_changed:
                if not self._outbox:  # else: posted after our last look, not sent by its poster
                    return

    def _take_answers(self) -> list[Answer]:
        with self._outbox_changed:
            batch = self._outbox[:ANSWER_BATCH]
            del self._outbox[: len(batch)]
            self._outbox_changed.notify_all()
        return batch

    def _send_answers(self, batch: list[Answer]) -> None:
        """Send `batch`'s answers; retry those that failed retriably; finish each request."""
        backoff = Backoff(initial=0.2, maximum=10.0)
        while batch:
            try:
                results = self._store(batch)
            except Exception:
                log.exception(
                    "sending %d check answer(s) of group %s failed unexpectedly; left unanswered",
                    len(batch),
                    self._group,
                )
                for request, _ in batch:
                    self._abandon(request)
                    self._queue.task_done()
                return
            retry: list[Answer] = []
            errors: list[SdkError] = []
            for (request, state), result in zip(batch, results, strict=True):
                if isinstance(result, SdkError) and result.retriable and not self._closing.is_set():
                    retry.append((request, state))
                    errors.append(result)
                    continue
                try:
                    self._settle(request, state, result)
                except Exception:  # the transport's acknowledge, say: the others still settle
                    log.exception(
                        "check %d of %s failed unexpectedly",
                        request.check_number,
                        request.transaction_id,
                    )
                finally:
                    self._queue.task_done()
            if retry:
                delay = backoff.next_delay()
                log.warning(
                    "sending %d check answer(s) of group %s failed (%s); retrying in %.1fs",
                    len(retry),
                    self._group,
                    errors[0],
                    delay,
                )
                self._closing.wait(delay)
            batch = retry

    def _settle(
        self, request: CheckRequest, state: LocalTransactionState, result: OpReceipt | SdkError
    ) -> None:
        """Finish a request whose answer was stored, refused, or given up at stop."""
        if not isinstance(result, SdkError):
            log.debug(
                "answered check %d of %s: %s",
                request.check_number,
                request.transaction_id,
                state.op,
            )
            self._finish(request, "answered")
        elif not result.retriable:
            log.error(
                "answer %s to check %d of %s was refused, not retried: %s",
                state.op,
                request.check_number,
                request.transaction_id,
                result,
            )
            self._finish(request, "refused")
        else:
            self._abandon(request)

    def _store(self, batch: list[Answer]) -> list[OpReceipt | SdkError]:
        ops = [(request.transaction_id, state.op, True) for request, state in batch]
        if isinstance(self._transport, SendsOps):
            return list(self._transport.send_ops(ops))
        results: list[OpReceipt | SdkError] = []
        for transaction_id, op, from_check in ops:
            try:
                results.append(self._transport.send_op(transaction_id, op, from_check))
            except SdkError as exc:
                results.append(exc)
        return results

    def _finish(self, request: CheckRequest, outcome: str) -> None:
        copies = self._ledger.answered(request.key)
        for handled in (request, *copies):
            self._transport.acknowledge(handled)
        self._count(outcome)

    def _abandon(self, request: CheckRequest) -> None:
        copies = self._ledger.abandoned(request.key)
        self._count("abandoned", 1 + len(copies))

    # -- shutdown -----------------------------------------------------------------------
    def stop(self, timeout: float = 10.0) -> None:
        """Stop polling, answer what is queued for up to `timeout` seconds, abandon the rest."""
        with self._lifecycle:
            if self._stopped or not self._started:
                self._stopped = True
                return
            self._stopped = True
        deadline = time.monotonic() + timeout
        self._stopping.set()
        self._room.set()
        self._poller.join(self._poll_wait + max(timeout, 0) + 5)
        if self._poller.is_alive():
            log.warning("the check poller of group %s did not stop in time", self._group)
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks and (left := deadline - time.monotonic()) > 0:
                self._queue.all_tasks_done.wait(left)
        self._closing.set()
        before = self.stats().abandoned
        while True:
            try:
                request = self._queue.get_nowait()
            except queue.Empty:
                break
            self._abandon(request)
            self._queue.task_done()
        for worker in self._workers:
            worker.join(max(0.5, deadline - time.monotonic()))
        busy = sum(worker.is_alive() for worker in self._workers)
        if busy:
            log.warning(
                "%d check worker(s) of group %s still inside check_local_transaction "
                "after the shutdown timeout; their answers are abandoned",
                busy,
                self._group,
            )
        abandoned = self.stats().abandoned - before
        if abandoned:
            log.warning(
                "shutdown: %d check request(s) of group %s left unanswered; another "
                "producer of the group or the coordinator's next check asks again",
                abandoned,
                self._group,
            )
        else:
            log.info(
                "check loop of group %s stopped; every taken request was answered", self._group
            )
