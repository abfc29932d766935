"""How many transactions the load may send now (pure).

Two bounds, both optional:

- the in-flight window: transactions sent but not yet decided by the coordinator. It keeps
  an as-fast-as-it-goes run closed-loop: the load cannot pile up an unbounded backlog in
  Kafka, so the decision rate it measures is one the system sustains, and latency stays a
  property of the system rather than of a queue the benchmark built;
- a target rate (transactions per second since the start): an open-loop load, for
  latency at a given throughput.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pacing:
    """The bounds; None means unbounded."""

    window: int | None = 10_000
    rate: float | None = None

    def __post_init__(self) -> None:
        if self.window is not None and self.window < 1:
            raise ValueError(f"window must be at least 1, not {self.window}")
        if self.rate is not None and self.rate <= 0:
            raise ValueError(f"rate must be positive, not {self.rate}")

    def room(self, *, sent: int, decided: int, elapsed: float, limit: int) -> int:
        """Return how many may be sent now (0..limit), given what was sent and decided."""
        room = limit
        if self.window is not None:
            room = min(room, self.window - (sent - decided))
        if self.rate is not None:
            room = min(room, int(self.rate * elapsed) + 1 - sent)
        return max(room, 0)
