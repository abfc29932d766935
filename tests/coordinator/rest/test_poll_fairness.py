"""contract 5.1: long polls are shared fairly between groups; a group over its share gets 429."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from coordinator.core.config import Config
from coordinator.rest.app import create_app
from coordinator.rest.poll_slots import PollSlots, PollSlotsFullError
from tests.coordinator.sdk.helpers import wait_until
from tests.coordinator.sdk.http_server import serving

from .test_check_poll import check_row, publish

# -- the rule (pure) --------------------------------------------------------------------


def test_each_group_gets_its_share_and_the_total_is_bounded() -> None:
    slots = PollSlots(total=5, per_group=2)
    held = [slots.take("a"), slots.take("a")]
    with pytest.raises(PollSlotsFullError, match="'a' already has 2 long polls waiting"):
        slots.take("a")
    held += [slots.take("b"), slots.take("b"), slots.take("c")]
    with pytest.raises(PollSlotsFullError, match="all 5 long-poll slots are taken"):
        slots.take("d")
    assert (slots.held("a"), slots.held("d"), slots.total_held()) == (2, 0, 5)
    held[0].release()
    held[0].release()  # releasing twice frees one slot only
    assert slots.total_held() == 4
    held.append(slots.take("d"))
    for slot in held:
        slot.release()
    assert slots.total_held() == 0
    assert slots.held("a") == 0


def test_the_share_is_derived_from_the_total() -> None:
    slots = PollSlots(total=64)
    assert 1 <= slots.per_group < 64
    assert slots.total // slots.per_group >= 4  # at least four groups poll at full share
    with pytest.raises(ValueError, match="per_group"):
        PollSlots(total=4, per_group=5)


# -- real concurrent long polls on a real server ----------------------------------------


@pytest.mark.kafka
def test_a_group_over_its_share_gets_429_and_another_group_still_polls(
    rest_config: Config,
) -> None:
    app = create_app(rest_config)
    slots: PollSlots = app.state.services.poll_slots
    share = slots.per_group
    # The greedy polls wait as long as a poll may, so they hold the share while the checks
    # are made however slowly; then one check request each ends them (at most one per poll).
    wait = rest_config.rest.check_poll_max_wait.total_seconds()

    with serving(app) as url, ThreadPoolExecutor(share) as pool:

        def long_poll(group: str, seconds: float, most: int = 100) -> httpx.Response:
            return httpx.get(
                f"{url}/v1/check-requests",
                params={"producer_group": group, "wait_seconds": seconds, "max": most},
                timeout=60,
            )

        waiting = [pool.submit(long_poll, "greedy", wait, 1) for _ in range(share)]
        # Positive marker: the app holds the group's whole share.
        wait_until(lambda: slots.held("greedy") == share, what="the greedy polls to start")
        over = long_poll("greedy", 0)
        other = long_poll("modest", 0)
        still_full = slots.held("greedy") == share
        publish(rest_config, [check_row(f"greedy-{i}", "greedy") for i in range(share)])
        answers = [future.result() for future in waiting]

    assert still_full, f"a greedy poll ended within its {wait:.0f} s wait before the checks"
    assert over.status_code == 429, over.text
    assert over.json()["error"] == "too_many_polls"
    assert "greedy" in over.json()["message"]
    assert int(over.headers["retry-after"]) >= 1
    assert other.status_code == 200, other.text
    assert [a.status_code for a in answers] == [200] * share, [a.text for a in answers]
    handed_out = [r["transaction_id"] for a in answers for r in a.json()["check_requests"]]
    assert sorted(handed_out) == sorted(f"greedy-{i}" for i in range(share))
    assert slots.total_held() == 0


@pytest.mark.kafka
def test_queueing_is_bounded_a_full_ingress_answers_at_once(rest_config: Config) -> None:
    """When every slot is taken a new poll is answered 429 at once, never queued."""
    slots = PollSlots(total=2, per_group=1)
    app = create_app(rest_config, poll_slots=slots)
    held = [slots.take("a"), slots.take("b")]
    # The longest wait: a poll queued for it would answer no sooner; a refusal takes a
    # moment, a loaded machine's few seconds.
    wait = rest_config.rest.check_poll_max_wait.total_seconds()
    try:
        with serving(app) as url:
            answer = httpx.get(
                f"{url}/v1/check-requests",
                params={"producer_group": "c", "wait_seconds": wait},
                timeout=60,
            )
    finally:
        for slot in held:
            slot.release()
    assert answer.status_code == 429
    assert answer.json()["error"] == "too_many_polls"
    assert answer.elapsed.total_seconds() < wait / 2, "the poll was queued instead of refused"
