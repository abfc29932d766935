"""A check claim: "instance X answered check N of transaction T", on the check topic itself.

A check goes first to the producer instance that sent the half (contract 5.3): that
instance reads every partition of its group's check topic for checks addressed to it,
while each partition's owner in the group (Kafka's consumer group, coordinator/sdk/
kafka_transport.py) holds such a check for a short delay before it answers it itself.
When the sender has answered, it appends a claim to the check's own partition, after the
check, so the owner reads it before the delay runs out and lets the check go
(coordinator/sdk/check_routing.py):

    key       transaction id (UTF-8)
    value     JSON: transaction_id, check_number, producer_group, producer_instance
    headers   txcoord.kind: CHECK_CLAIM; txcoord.producer_instance

A claim has no txcoord.producer_group header, so every reader that picks its group's
checks by that header (the REST ingress's long poll, the tests' responder) passes over it
without parsing. A claim only ever spares a second answer: a lost or forged one makes the
owner answer too, or not until the coordinator's next check.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Self

from coordinator.protocol.check_record import Record
from coordinator.protocol.ingress import KIND, KIND_CHECK_CLAIM, PRODUCER_INSTANCE

_CLAIM = KIND_CHECK_CLAIM.encode()


def is_claim(headers: Iterable[tuple[str, bytes | None]] | None) -> bool:
    """Return True if a check-topic record with these headers is a claim, not a check."""
    return any(name == KIND and value == _CLAIM for name, value in headers or ())


@dataclass(frozen=True)
class CheckClaim:
    """One claim; see the module docstring."""

    transaction_id: str
    check_number: int
    producer_group: str
    producer_instance: str

    @property
    def key(self) -> tuple[str, int]:
        """Return (transaction_id, check_number): the claimed check's identity."""
        return (self.transaction_id, self.check_number)

    def encode(self) -> Record:
        """Return (key, value, headers) of the claim's record."""
        value = {
            "transaction_id": self.transaction_id,
            "check_number": self.check_number,
            "producer_group": self.producer_group,
            "producer_instance": self.producer_instance,
        }
        headers = [(KIND, _CLAIM), (PRODUCER_INSTANCE, self.producer_instance.encode())]
        return self.transaction_id.encode(), json.dumps(value).encode(), headers

    @classmethod
    def decode(cls, value: bytes | str) -> Self:
        """Parse a claim's value; ValueError if it is not one."""
        try:
            fields: Any = json.loads(value)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"check claim is not JSON: {exc}") from None
        if not isinstance(fields, dict):
            raise ValueError(f"check claim must be a JSON object, not {type(fields).__name__}")
        kinds = {"transaction_id": str, "check_number": int}
        kinds |= {"producer_group": str, "producer_instance": str}
        for name, kind in kinds.items():
            item = fields.get(name)
            if not isinstance(item, kind) or isinstance(item, bool):
                raise ValueError(f"check claim field {name!r} is missing or not {kind}: {item!r}")
        return cls(**{name: fields[name] for name in kinds})
