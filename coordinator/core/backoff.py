"""Exponential backoff with jitter, so clients that fail together do not retry in lockstep."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Backoff"]


@dataclass
class Backoff:
    """Delays initial, initial*multiplier, ... capped at maximum, each scaled by [0.5, 1).

    "Equal jitter": half the delay is kept, half is random, so a crowd of producers
    spreads out but none retries at once after a failure.
    """

    initial: float = 0.5
    maximum: float = 30.0
    multiplier: float = 2.0
    rand: Callable[[], float] = field(default=random.random, repr=False)
    failures: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.initial <= self.maximum:
            raise ValueError(
                f"Backoff needs 0 < initial <= maximum, not {self.initial}, {self.maximum}"
            )
        if self.multiplier < 1:
            raise ValueError(f"Backoff multiplier must be >= 1, not {self.multiplier}")

    def next_delay(self) -> float:
        """Count one more failure and return how long to wait before the next try."""
        ceiling = min(self.maximum, self.initial * self.multiplier ** min(self.failures, 64))
        self.failures += 1
        return ceiling * (0.5 + 0.5 * self.rand())

    def reset(self) -> None:
        """Forget past failures after a success."""
        self.failures = 0
