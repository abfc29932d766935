"""How long `txcoord state rebuild` takes with N transactions in the coordinator's state.

Run by the pending-state phase (pending.py) after each level's steady load, when its
engine holds N unresolved transactions (and the steady load's decided ones): the engine
stops, the state is rebuilt from the checkpoint, then again from the warehouse alone (the
checkpoint moved aside first, as when it is lost), each with the configuration's partition
count, and the engine starts again on the result. Each rebuild's time is the command's own
work, without a Spark session's start (the bench's session is reused): reading the state,
or deriving it from the tables, and the new checkpoint's first batch.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from coordinator.bench.context import PhaseContext
from coordinator.runtime.engine import Engine
from streams.state.rebuild import rebuild


def measure_rebuilds(context: PhaseContext, level: int) -> tuple[dict[str, Any], Engine]:
    """Stop the engine, rebuild its state both ways, start it again; return the times and
    the engine now running."""
    config = context.config
    context.engine.stop()
    found: dict[str, Any] = {"pending": level}
    for source in ("checkpoint", "warehouse"):
        context.reporter.phase(f"pending {level:,}: rebuild from the {source}", None)
        if source == "warehouse":
            lost = Path(config.streams.checkpoint_dir)
            shutil.move(lost, lost.with_name(f"{lost.name}-lost-{level}"))
        started = time.monotonic()
        done = rebuild(context.engine.spark, config, config.spark.shuffle_partitions, source)
        found[source] = {
            "seconds": round(time.monotonic() - started, 1),
            "transactions": done.transactions,
        }
    engine = Engine(context.engine.spark, config).start()
    return found, engine
