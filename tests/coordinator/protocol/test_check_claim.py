"""The check claim's codec, and how every reader tells a claim from a check."""

from __future__ import annotations

import json

import pytest

from coordinator.protocol import ingress as fmt
from coordinator.protocol.check_claim import CheckClaim, is_claim


def test_decode_inverts_encode() -> None:
    claim = CheckClaim("tx-1", 3, "orders", "host-7")
    key, value, headers = claim.encode()
    assert key == b"tx-1"
    assert is_claim(headers)
    # No group header: readers that pick their group's checks by it pass a claim over.
    assert fmt.PRODUCER_GROUP not in dict(headers)
    assert dict(headers)[fmt.PRODUCER_INSTANCE] == b"host-7"
    assert CheckClaim.decode(value) == claim
    assert claim.key == ("tx-1", 3)


def test_a_check_record_is_not_a_claim() -> None:
    assert not is_claim([(fmt.PRODUCER_GROUP, b"orders")])
    assert not is_claim([(fmt.KIND, fmt.KIND_TICK.encode())])
    assert not is_claim(None)


@pytest.mark.parametrize(
    "value",
    [
        b"not json",
        b"[1]",
        json.dumps({"transaction_id": "t", "check_number": "1"}).encode(),
        json.dumps(
            {"transaction_id": "t", "check_number": True, "producer_group": "g",
             "producer_instance": "i"}
        ).encode(),
    ],
)  # fmt: skip
def test_a_malformed_claim_is_refused_by_name(value: bytes) -> None:
    with pytest.raises(ValueError, match="check claim"):
        CheckClaim.decode(value)
