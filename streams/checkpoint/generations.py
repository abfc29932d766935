"""Where the coordinator's checkpoint is, and what it holds.

The checkpoint lives in generations below `streams.checkpoint_dir`: `coordinator` (the first,
as every earlier version made it), then `coordinator.1`, `coordinator.2`, ... each built by
`txcoord state rebuild` (streams/state/rebuild.py) from the one before or from the warehouse.
A rebuilt generation is in use once it holds ACTIVE_MARK, written last, in one step, after its
first batch committed: the newest marked generation is the checkpoint, so a rebuild killed at
any moment leaves either the old generation in use or the new one complete, never a mix.

What a generation holds is read from Spark's own files (no Spark needed): the offset log
records, for every batch, the Kafka offsets it reads up to and the session configuration the
query keeps for its whole life (`spark.sql.shuffle.partitions`: the stage's state is split
that many ways, and Spark silently keeps the checkpoint's number whatever the session says).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from streams.checkpoint.checkpoint_files import Files

BASE = "coordinator"
#: Written last into a rebuilt generation: from then on it is the checkpoint.
ACTIVE_MARK = "_txcoord_active"
#: How a rebuilt generation was started (its source and Kafka offsets), written first.
REBUILD_FILE = "_txcoord_rebuild"
STATE_LAYOUT_FILE = "_txcoord_state_layout"
PARTITIONS_CONF = "spark.sql.shuffle.partitions"


def generation_name(generation: int) -> str:
    """Return the folder name of `generation` (0: `coordinator`)."""
    return BASE if generation == 0 else f"{BASE}.{generation}"


def generations(files: Files) -> list[int]:
    """Return the generations present below the checkpoint folder, oldest first."""
    found = []
    for name in files.names():
        if name == BASE:
            found.append(0)
        elif name.startswith(BASE + ".") and name[len(BASE) + 1 :].isdigit():
            found.append(int(name[len(BASE) + 1 :]))
    return sorted(found)


def active_generation(files: Files) -> int:
    """Return the generation in use: the newest marked one (0 when none is)."""
    marked = [
        g for g in generations(files) if g > 0 and files.text(f"{generation_name(g)}/{ACTIVE_MARK}")
    ]
    return max(marked, default=0)


def _batches(files: Files, folder: str) -> list[int]:
    return sorted(int(name) for name in files.names(folder) if name.isdigit())


@dataclass(frozen=True)
class CheckpointFacts:
    """What one generation of the coordinator's checkpoint holds."""

    name: str  # its folder, relative to the checkpoint folder
    layout: str | None  # the state layout recorded at its start (None: none recorded)
    last_planned: int | None  # its newest batch in the offset log
    last_committed: int | None  # its newest batch in the commit log
    shuffle_partitions: int | None  # how many ways its state is split (None: no batch yet)
    committed_offsets: dict[str, dict[str, int]] | None  # Kafka offsets read up to, committed

    @property
    def has_batches(self) -> bool:
        """Return True once the query planned a batch."""
        return self.last_planned is not None

    @property
    def unfinished(self) -> bool:
        """Return True when the newest planned batch has not committed (its writes may be
        partly done: only this checkpoint's query can finish them)."""
        return self.last_planned is not None and self.last_planned != self.last_committed


def _offsets_file(files: Files, name: str, batch: int) -> tuple[dict[str, Any], list[Any]]:
    """Return (batch metadata, sources' offsets) of offsets file `batch` of generation `name`."""
    text = files.text(f"{name}/offsets/{batch}") or ""
    lines = text.splitlines()  # "v1", the batch's metadata, then one line per source
    metadata = json.loads(lines[1]) if len(lines) > 1 else {}
    return metadata, [json.loads(line) if line != "-" else None for line in lines[2:]]


def facts(files: Files, generation: int) -> CheckpointFacts:
    """Return what `generation` holds (an absent one: no batches, no layout)."""
    name = generation_name(generation)
    planned = _batches(files, f"{name}/offsets")
    committed = _batches(files, f"{name}/commits")
    partitions = offsets = None
    if planned:
        metadata, _ = _offsets_file(files, name, planned[-1])
        conf = metadata.get("conf", {})
        partitions = int(conf[PARTITIONS_CONF]) if PARTITIONS_CONF in conf else None
    if committed:
        _, sources = _offsets_file(files, name, committed[-1])
        offsets = sources[0] if sources else None
    layout = files.text(f"{name}/{STATE_LAYOUT_FILE}")
    return CheckpointFacts(
        name=name,
        layout=layout.strip() if layout is not None else None,
        last_planned=planned[-1] if planned else None,
        last_committed=committed[-1] if committed else None,
        shuffle_partitions=partitions,
        committed_offsets=offsets,
    )


def active_facts(files: Files) -> CheckpointFacts:
    """Return what the generation in use holds."""
    return facts(files, active_generation(files))


def interrupted_rebuild(files: Files) -> int | None:
    """Return the generation of a rebuild that started its query and did not switch (newer
    than the one in use, its plan recorded, a batch planned), None when there is none."""
    active = active_generation(files)
    for generation in generations(files):
        name = generation_name(generation)
        if (
            generation > active
            and files.text(f"{name}/{REBUILD_FILE}") is not None
            and facts(files, generation).has_batches
        ):
            return generation
    return None
