"""The benchmark's mix of transaction kinds, and the ids that carry each one's kind (pure).

Five kinds, as a RocketMQ producer meets them:

    commit            half, then COMMIT at once
    rollback          half, then ROLLBACK at once
    checked-commit    half, then UNKNOWN; COMMIT when the coordinator checks
    checked-rollback  half, then UNKNOWN; ROLLBACK when the coordinator checks
    rechecked-commit  half, then UNKNOWN; UNKNOWN to the first check, COMMIT to the second

The rechecked kind is the only one that meets a second check, so it is what measures the
spacing of later checks (`transaction_check_interval` after the previous one was sent).

The kind is part of the transaction id (`<run>-<n>-<code>`), so the check responder, the
verification and the latency analysis all read it from the id alone. Kinds are dealt in a
smooth weighted round robin: every prefix of the sequence is as close to the mix as whole
numbers allow, so a short run of 200 transactions has the mix too.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from coordinator.core.state_machine import Event
from coordinator.core.state_machine import TransactionState as State

#: The op and state names, the state machine's own (they meet the tables' strings).
_COMMIT, _ROLLBACK, _UNKNOWN = Event.COMMIT.value, Event.ROLLBACK.value, Event.UNKNOWN.value
_COMMITTED, _ROLLED_BACK = State.COMMITTED.name, State.ROLLED_BACK.name


@dataclass(frozen=True)
class Kind:
    """One kind of transaction: what the producer sends first and how a check is answered."""

    name: str
    code: str  # in the transaction id
    first_op: str  # COMMIT, ROLLBACK or UNKNOWN (what the SDK sends after the local tx)
    check_answer: str  # what the producer answers when checked
    expected_state: str  # the final state the coordinator must record
    #: The check answered with `check_answer`; the checks before it are answered UNKNOWN.
    decided_at_check: int = 1

    @property
    def checked(self) -> bool:
        """Return True for the kinds decided by a check answer."""
        return self.first_op == _UNKNOWN

    def answer(self, check_number: int) -> str:
        """Return the answer to check `check_number`: UNKNOWN until the deciding check."""
        return _UNKNOWN if check_number < self.decided_at_check else self.check_answer


COMMIT = Kind("commit", "c", _COMMIT, _COMMIT, _COMMITTED)
ROLLBACK = Kind("rollback", "r", _ROLLBACK, _ROLLBACK, _ROLLED_BACK)
CHECKED_COMMIT = Kind("checked-commit", "cc", _UNKNOWN, _COMMIT, _COMMITTED)
CHECKED_ROLLBACK = Kind("checked-rollback", "cr", _UNKNOWN, _ROLLBACK, _ROLLED_BACK)
RECHECKED_COMMIT = Kind("rechecked-commit", "rc", _UNKNOWN, _COMMIT, _COMMITTED, 2)
KINDS = {
    kind.name: kind
    for kind in (COMMIT, ROLLBACK, CHECKED_COMMIT, CHECKED_ROLLBACK, RECHECKED_COMMIT)
}
_BY_CODE = {kind.code: kind for kind in KINDS.values()}

#: 80% commit, 10% rollback, 4% checked-then-commit, 4% checked-then-rollback and 2%
#: committed at the second check (taken from the checked kinds' 5% each), so that the later
#: checks are measured too.
DEFAULT_MIX = "commit=80,rollback=10,checked-commit=4,checked-rollback=4,rechecked-commit=2"


@dataclass(frozen=True)
class Mix:
    """Relative weights of the kinds (only positive weights are kept)."""

    weights: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        if not self.weights:
            raise ValueError("the mix needs at least one kind with a positive weight")
        for name, weight in self.weights:
            if name not in KINDS:
                raise ValueError(f"unknown kind {name!r} in the mix; kinds: {', '.join(KINDS)}")
            if weight <= 0:
                raise ValueError(f"weight of {name} must be positive, not {weight}")

    @classmethod
    def parse(cls, text: str) -> Mix:
        """Return the mix of "commit=80,rollback=10,..." (weights are relative integers)."""
        weights: dict[str, int] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name, sep, value = part.partition("=")
            if not sep:
                raise ValueError(f"mix item {part!r} must look like kind=weight")
            try:
                weight = int(value)
            except ValueError:
                raise ValueError(
                    f"weight of {name.strip()!r} must be an integer, not {value!r}"
                ) from None
            if weight < 0:
                raise ValueError(f"weight of {name.strip()!r} must not be negative")
            if weight:
                weights[name.strip()] = weights.get(name.strip(), 0) + weight
        return cls(tuple(weights.items()))

    def as_dict(self) -> dict[str, float]:
        """Return each kind's share (0..1)."""
        total = sum(w for _, w in self.weights)
        return {name: w / total for name, w in self.weights}

    def text(self) -> str:
        """Return the mix in the form `parse` reads."""
        return ",".join(f"{name}={weight}" for name, weight in self.weights)

    @property
    def has_checked(self) -> bool:
        """Return True if some kind is decided by a check answer."""
        return any(KINDS[name].checked for name, _ in self.weights)

    def kinds(self) -> Iterator[Kind]:
        """Yield kinds forever, smooth weighted round robin (nginx's algorithm)."""
        total = sum(w for _, w in self.weights)
        current = dict.fromkeys((name for name, _ in self.weights), 0)
        while True:
            for name, weight in self.weights:
                current[name] += weight
            chosen = max(current, key=lambda name: current[name])
            current[chosen] -= total
            yield KINDS[chosen]


def transaction_id(run: str, number: int, kind: Kind) -> str:
    """Return the id of transaction `number` of run `run` (the kind's code at the end)."""
    return f"{run}-{number:09d}-{kind.code}"


def kind_of(transaction_id: str) -> Kind | None:
    """Return the kind a bench transaction id carries, or None for another id."""
    return _BY_CODE.get(transaction_id.rsplit("-", 1)[-1])
