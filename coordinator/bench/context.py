"""What every phase of a run is given: the settings, the engine under test, the reporter."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from coordinator.bench.workload import DEFAULT_MIX

if TYPE_CHECKING:
    from coordinator.bench.batches import BatchRecorder
    from coordinator.core.config import Config
    from coordinator.runtime.engine import Engine


#: The ingress paths a run can drive: the Kafka record format (contract 5.2), the REST ingress
#: (5.1), RocketMQ's Java client over the gRPC endpoint (5.6).
PATHS = ("kafka", "rest", "grpc")


class Reporter(Protocol):
    """Where a run reports its progress (the command draws a progress bar from it)."""

    def phase(self, name: str, total: float | None) -> None:
        """A phase starts; `total` is its amount of work when known."""
        ...

    def update(self, completed: float, detail: str) -> None:
        """The current phase progressed."""
        ...

    def note(self, text: str) -> None:
        """Something worth a line of its own happened."""
        ...


@dataclass(frozen=True)
class BenchSettings:
    """What `txcoord bench` runs; validated when built."""

    paths: tuple[str, ...] = ("kafka", "rest")
    duration: float | None = 30.0  # seconds of load per path (or count)
    count: int | None = None  # transactions per path (instead of duration)
    rate: float | None = None  # target tx/s; None: as fast as the window allows
    window: int = 10_000  # most transactions sent and not yet decided
    batch: int = 500  # transactions per Kafka flush / REST batch request
    # The gRPC path's Java client threads, each one transaction at a time (its concurrency,
    # as `batch` is the other paths'): the client sends a transactional message synchronously.
    grpc_senders: int = 32
    mix: str = DEFAULT_MIX
    warmup: int = 200  # transactions through a fresh engine before measuring (0: none)
    warmup_max_seconds: float = 240.0  # ... then on until the JIT settles, at most this long
    idle_seconds: float = 10.0  # the engine measured with no load at all (0: not measured)
    rest_seconds: float = (
        60.0  # ... and once its ticker rests (streams/kafka_io/tick_pace.py; 0: not)
    )
    pending: tuple[int, ...] = (0, 10_000)  # unresolved-state levels (0: a baseline); () skips
    pending_window: float = 15.0  # seconds of steady load measured per level
    pending_rate: float = 50.0  # tx/s of that steady load
    rebuild: bool = True  # time `txcoord state rebuild` at each pending level but 0
    peer: bool = True
    peer_seconds: float = 15.0
    peer_producers: int = 4  # producers side by side, for both peers
    java_peer: bool = True
    java_peer_records: int = 10_000  # records per producer in the short shape
    java_peer_batch: int = 100  # records per transaction the batch shape aims at
    ceiling: bool = True
    # The Kafka path once more on an engine whose warehouse and checkpoints are in a bucket
    # of an S3 API on loopback (moto's server), beside the local one (runner.py `_on_s3`).
    s3: bool = False
    # Commit→consumed beside commit→visible: a light commit load read by an SDK consumer
    # process (consume.py).
    consume: bool = True
    consume_seconds: float = 20.0
    ceiling_records: int = 100_000
    ceiling_repeats: int = 3
    transaction_timeout: str = "2s"
    transaction_check_interval: str = "5s"  # a rechecked transaction decides in seconds
    drain_timeout: float = 180.0  # longest wait for the last decisions after sending
    master: str = "local[2]"
    driver_memory: str = "4g"
    state_dir: Path | None = None  # None: a temporary folder, removed afterwards

    def __post_init__(self) -> None:
        if not self.paths or not set(self.paths) <= set(PATHS):
            raise ValueError(f"paths must be some of {', '.join(PATHS)}, not {self.paths}")
        if (self.duration is None) == (self.count is None):
            raise ValueError("give exactly one of duration and count")
        if self.duration is not None and self.duration <= 0:
            raise ValueError(f"duration must be positive, not {self.duration}")
        if self.count is not None and self.count < 1:
            raise ValueError(f"count must be at least 1, not {self.count}")
        if any(level < 0 for level in self.pending):
            raise ValueError(f"pending levels must not be negative, not {self.pending}")
        if min(self.warmup, self.warmup_max_seconds, self.idle_seconds, self.rest_seconds) < 0:
            raise ValueError(
                "warmup, warmup_max_seconds, idle_seconds and rest_seconds must not be negative"
            )
        for name in (
            "window",
            "batch",
            "grpc_senders",
            "peer_producers",
            "java_peer_records",
            "java_peer_batch",
            "ceiling_records",
            "ceiling_repeats",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, not {getattr(self, name)}")


@dataclass
class PhaseContext:
    """The running pieces a phase uses."""

    settings: BenchSettings
    config: Config
    engine: Engine
    recorder: BatchRecorder
    reporter: Reporter
    work_dir: Path
    stamp: str  # unique per run: part of every transaction id
