"""A token's sends in flight are capped (rest.max_sends_per_token): a flood of one token's
sends cannot queue every other group's behind it on the send threads (coordinator/rest/pools.py).

The cap is bookkeeping around the route (the send itself is the send tests' subject): here
the wrapper runs a route that holds its thread until released, on anyio's real threads, so
that "in flight" is exact rather than a race against Kafka's acknowledgements.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio
import pytest

from coordinator.rest.auth import Principal
from coordinator.rest.errors import ApiError
from coordinator.rest.in_flight import InFlight
from coordinator.rest.pools import WRITE_THREADS, writing

ORDERS = Principal(group="orders", admin=False, name="orders-app")
BILLING = Principal(group="billing", admin=False, name="billing-app")
ADMIN = Principal(group=None, admin=True, name="ops")
CAP = 2


@dataclass
class _Svc:
    write_limiter: anyio.CapacityLimiter = field(
        default_factory=lambda: anyio.CapacityLimiter(WRITE_THREADS)
    )
    read_limiter: anyio.CapacityLimiter = field(default_factory=lambda: anyio.CapacityLimiter(4))
    reads_in_flight: InFlight = field(default_factory=lambda: InFlight(CAP, "reads"))
    sends_in_flight: InFlight = field(default_factory=lambda: InFlight(CAP, "sends"))


def _held_route(gate: threading.Event, entered: threading.Semaphore) -> Callable[..., str]:
    def send_half(svc: _Svc, who: Principal) -> str:
        entered.release()
        gate.wait(10)
        return who.name

    return send_half


async def _outcomes(callers: list[Principal]) -> list[str]:
    """Send once per caller while every send is held in flight; return each outcome."""
    svc = _Svc()
    gate, entered = threading.Event(), threading.Semaphore(0)
    route = writing(_held_route(gate, entered))
    outcomes: list[str] = [""] * len(callers)

    async def send(index: int, who: Principal) -> None:
        try:
            outcomes[index] = await route(svc=svc, who=who)
        except ApiError as exc:
            outcomes[index] = f"{exc.status} {exc.code}"

    async with anyio.create_task_group() as tasks:
        for index, who in enumerate(callers):
            tasks.start_soon(send, index, who)
            await anyio.sleep(0.05)  # in this order: the refusals fall on the last ones
        await anyio.sleep(0.2)
        gate.set()
    assert svc.sends_in_flight.held(ORDERS) == 0, "a send's share was not given back"
    return outcomes


def test_a_token_past_its_share_of_sends_is_refused_and_the_others_still_send() -> None:
    outcomes = anyio.run(_outcomes, [ORDERS, ORDERS, ORDERS, BILLING, BILLING])
    assert outcomes == ["orders-app", "orders-app", "429 too_many_requests"] + ["billing-app"] * 2


def test_an_admin_token_is_not_capped() -> None:
    assert anyio.run(_outcomes, [ADMIN] * (CAP + 2)) == ["ops"] * (CAP + 2)


def test_the_share_comes_back_when_a_send_answers() -> None:
    async def sequential() -> list[str]:
        svc = _Svc()
        gate = threading.Event()
        gate.set()
        route = writing(_held_route(gate, threading.Semaphore(0)))
        return [await route(svc=svc, who=ORDERS) for _ in range(CAP * 3)]

    assert anyio.run(sequential) == ["orders-app"] * (CAP * 3)


def test_a_failed_send_gives_its_share_back() -> None:
    async def failing_then_ok() -> int:
        svc = _Svc()

        def send_half(svc: _Svc, who: Principal) -> str:
            raise RuntimeError("Kafka went away")

        route = writing(send_half)
        for _ in range(CAP * 2):
            with pytest.raises(RuntimeError):
                await route(svc=svc, who=ORDERS)
        return svc.sends_in_flight.held(ORDERS)

    assert anyio.run(failing_then_ok) == 0
