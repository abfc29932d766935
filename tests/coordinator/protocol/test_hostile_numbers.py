"""Records anyone with write access to the consumer topics can send: a bad number is skipped.

`{"offset": Infinity}` on the consumer offsets topic raised OverflowError out of the decoder
(it caught ValueError only): REST receives answered 500, SDK consumers of every group on that
partition failed at start and at each rebalance, `txcoord consumers list` crashed. A delivery
notice had the same hole. Each such record must read as "not one of ours", nothing more.
"""

from __future__ import annotations

import json

import pytest

from coordinator.protocol.deliveries import MAX_WHOLE, decode_notice, whole
from coordinator.sdk.consumer.offset_store import _decode

HOSTILE = [
    "Infinity", "-Infinity", "NaN", "1e400", "1.5", "true", "-1", str(MAX_WHOLE + 1),
    '"7"', "null", "[1]", "{}",
]  # fmt: skip


@pytest.mark.parametrize("number", HOSTILE)
def test_an_offset_record_with_a_bad_number_is_skipped(number: str) -> None:
    key = json.dumps(["g", "T", 0]).encode()
    assert _decode(key, f'{{"offset": {number}, "member": "m", "at": 1}}'.encode()) is None
    assert _decode(key, f'{{"offset": 3, "member": "m", "at": {number}}}'.encode()) is None
    assert _decode(f'["g", "T", {number}]'.encode(), b'{"offset": 3}') is None


@pytest.mark.parametrize("number", HOSTILE)
def test_a_notice_with_a_bad_number_is_skipped(number: str) -> None:
    assert decode_notice(f'{{"v": 1, "batch": {number}, "at": 1, "queues": []}}'.encode()) is None
    assert (
        decode_notice(f'{{"v": 1, "batch": 1, "at": 1, "queues": [["T", 0, {number}]]}}'.encode())
        is None
    )


def test_good_records_still_read() -> None:
    key = json.dumps(["g", "T", 2]).encode()
    stored = _decode(key, b'{"offset": 9, "member": "m", "at": 5}')
    assert stored is not None and (stored.queue_id, stored.offset) == (2, 9)
    notice = decode_notice(b'{"v": 1, "batch": 4, "at": 5, "queues": [["T", 0, 7]]}')
    assert notice is not None and notice.queues[0].next_offset == 7
    assert whole(MAX_WHOLE) == MAX_WHOLE
