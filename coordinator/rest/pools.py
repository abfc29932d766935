"""The threads the routes run on: writes never wait behind reads (issue 61, finding 4).

FastAPI runs a sync route on anyio's one pool of 40 threads, shared by every route. A slow
read holds its thread as long as it lasts (a lookup on a slow warehouse, an ack waiting for
its member's receive): one token with 120 lookups in flight held every thread, and another
group's send waited 8.3 s for one. So each kind of call has threads of its own:

    writes      sends of halves and ops, and their batches        WRITE_THREADS; at most
                `rest.max_sends_per_token` of one token in flight (in_flight.py)
    reads       lookups, acks, changes of invisible duration      READ_THREADS; at most
                `rest.max_reads_per_token` of one token in flight (in_flight.py)
    long polls  check polls and receives                          a thread per slot
                                                                  (poll_slots.py)
    anyio's     /healthz, /metrics

`writing` and `reading` make a route's sync handler (which takes `svc` and `who`) into an
async one that runs it on its pool. A call over its token's share is refused on the event
loop, before it takes a thread. FastAPI reads the handler's parameters through
`functools.wraps`, so the OpenAPI document and the validation are the handler's own.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import anyio
import anyio.to_thread

from coordinator.rest.errors import ApiError
from coordinator.rest.in_flight import InFlight, InFlightFullError, Ticket, holder_of, read_key

__all__ = ["READ_THREADS", "WRITE_THREADS", "Pools", "reading", "writing"]

#: Threads of the sends: anyio's default, which the sends had to themselves before reads
#: and long polls came.
WRITE_THREADS = 40
#: Threads of the reads, shared by every token (each at most rest.max_reads_per_token).
READ_THREADS = 40

T = TypeVar("T")


class Pools(Protocol):
    """What the wrappers need of the routes' `svc` (services.Services)."""

    write_limiter: anyio.CapacityLimiter
    read_limiter: anyio.CapacityLimiter
    reads_in_flight: InFlight
    sends_in_flight: InFlight


def writing(handler: Callable[..., T]) -> Callable[..., Awaitable[T]]:
    """Return `handler` (a sync route taking `svc` and `who`) run on the write pool within its
    token's share (an admin token and open mode: no share, they are trusted)."""

    @functools.wraps(handler)
    async def on_write_threads(**arguments: Any) -> T:
        svc: Pools = arguments["svc"]
        holder = holder_of(arguments["who"])
        ticket = None
        if holder is not None:
            ticket = _take(svc.sends_in_flight, holder, f"token {holder.name!r}", "sends")
        try:
            call = functools.partial(handler, **arguments)
            return await anyio.to_thread.run_sync(call, limiter=svc.write_limiter)
        finally:
            if ticket is not None:
                ticket.release()

    return on_write_threads


def _take(in_flight: InFlight, key: Any, label: str, setting: str) -> Ticket:
    """Count one call of `key` in, or refuse it with 429 naming `rest.max_<setting>_per_token`."""
    try:
        return in_flight.take(key, label)
    except InFlightFullError as exc:
        what = {
            "sends": "sends of halves, ops and batches",
            "reads": "lookups, acks and changes of invisible duration together",
        }[setting]
        raise ApiError(
            429,
            "too_many_requests",
            f"{exc} (rest.max_{setting}_per_token: {what})",
            {"Retry-After": "1"},
        ) from exc


def reading(
    kind: str, group_argument: str
) -> Callable[[Callable[..., T]], Callable[..., Awaitable[T]]]:
    """Return a decorator that runs a sync route (taking `svc` and `who`) on the read pool
    within its caller's share; `group_argument` names the route's argument that holds the
    `kind` group (an admin's reads count against that group)."""

    def wrap(handler: Callable[..., T]) -> Callable[..., Awaitable[T]]:
        @functools.wraps(handler)
        async def on_read_threads(**arguments: Any) -> T:
            svc: Pools = arguments["svc"]
            key, label = read_key(arguments["who"], kind, arguments.get(group_argument))
            ticket = _take(svc.reads_in_flight, key, label, "reads")
            try:
                call = functools.partial(handler, **arguments)
                return await anyio.to_thread.run_sync(call, limiter=svc.read_limiter)
            finally:
                ticket.release()

        return on_read_threads

    return wrap
