"""A flood of one token's reads against a REST ingress, from a process of its own.

Its clients keep `lookups` GET /v1/transactions/{id} and `receives` receives in flight at
once, each sent again as soon as it is answered (after `pause` seconds when the answer is a
429: an impatient client, which waits less than the Retry-After it was given). It runs in
another process so that its clients do not share the ingress's interpreter lock: what the
ingress does with the flood is measured, not how a test process schedules 100 threads.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from multiprocessing.synchronize import Event

import httpx


@dataclass(frozen=True)
class Flood:
    """What to flood: the ingress at `url`, as `token`."""

    url: str
    token: str
    lookups: int
    receives: int
    consumer_group: str
    topic: str
    pause: float = 0.25


class Flooding:
    """A flood running in a child process, and its answers so far: `looked_up` lookups
    answered (other than 429), `refused` calls answered 429 (`refused_reads`: lookups
    answered 429 too_many_requests with a Retry-After), `answered` calls in all."""

    def __init__(self, flood: Flood) -> None:
        context = multiprocessing.get_context("spawn")
        self.answered: Synchronized[int] = context.Value("q", 0)
        self.looked_up: Synchronized[int] = context.Value("q", 0)
        self.refused: Synchronized[int] = context.Value("q", 0)
        self.refused_reads: Synchronized[int] = context.Value("q", 0)
        self._stop = context.Event()
        counts = Counts(self.answered, self.looked_up, self.refused, self.refused_reads)
        self._process = context.Process(target=run, args=(flood, counts, self._stop), daemon=True)
        self._process.start()

    def stop(self) -> None:
        """Stop the flood and its process."""
        self._stop.set()
        self._process.join(10)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)


@dataclass(frozen=True)
class Counts:
    """The flood's answers, counted in memory both processes share."""

    answered: Synchronized[int]
    looked_up: Synchronized[int]
    refused: Synchronized[int]
    refused_reads: Synchronized[int]

    def count(self, answer: httpx.Response, lookup: bool) -> None:
        """Count one answer."""
        refused = answer.status_code == 429
        for counter, counts in (
            (self.answered, True),
            (self.refused, refused),
            (self.looked_up, lookup and not refused),
            (
                self.refused_reads,
                lookup
                and refused
                and answer.json().get("error") == "too_many_requests"
                and "retry-after" in answer.headers,
            ),
        ):
            if counts:
                with counter.get_lock():
                    counter.value += 1


def run(flood: Flood, counts: Counts, stop: Event) -> None:
    """Flood until `stop` is set (the child process's entry point)."""
    asyncio.run(_flood(flood, counts, stop))


async def _flood(flood: Flood, counts: Counts, stop: Event) -> None:
    limits = httpx.Limits(max_connections=flood.lookups + flood.receives + 8)
    headers = {"Authorization": f"Bearer {flood.token}"}

    async def again(call: Callable[[], Awaitable[httpx.Response]], lookup: bool) -> None:
        while not stop.is_set():
            try:
                answer = await call()
            except httpx.HTTPError:
                await asyncio.sleep(flood.pause)  # the ingress stopping: the test ends
                continue
            counts.count(answer, lookup)
            if answer.status_code == 429:
                await asyncio.sleep(flood.pause)

    async with httpx.AsyncClient(
        base_url=flood.url, headers=headers, timeout=120, limits=limits
    ) as http:

        def lookup(index: int) -> Callable[[], Awaitable[httpx.Response]]:
            return lambda: http.get(f"/v1/transactions/flood-{index}")

        def receive(index: int) -> Callable[[], Awaitable[httpx.Response]]:
            body = {
                "topic": flood.topic,
                "member": f"flood-{index % 2}",
                "wait_seconds": 1,
                "start_from": "first",
            }
            return lambda: http.post(
                f"/v1/consumer-groups/{flood.consumer_group}/receive", json=body
            )

        await asyncio.gather(
            *(again(lookup(i), lookup=True) for i in range(flood.lookups)),
            *(again(receive(i), lookup=False) for i in range(flood.receives)),
        )
