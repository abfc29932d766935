"""A micro-batch's rows brought into the driver as one Arrow table, whatever their size.

`DataFrame.toArrow()` brings a batch back in one job, the fast way. But one job's results may
not exceed `spark.driver.maxResultSize` (1 GiB by default): a batch holding more, such as a
backlog of hundreds of 4 MiB messages read at once after a long stop, would fail that job on
every retry, and the query with it, for ever. Such a batch is computed once more into a
local checkpoint (memory, then disk) and brought back in slices by a hash of a row number
given to each row before the checkpoint; a slice still too large is split in two. Only
the driver's Python process then holds the whole batch (its Arrow buffers are outside the
JVM heap).

Computing the batch a second time is what a retried task does anyway: the stateful stage
loads the state of the previous batch and decides from the batch's own rows and timestamp,
so it gives the same rows.
"""

from __future__ import annotations

import logging
import time

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

log = logging.getLogger(__name__)

__all__ = ["collect", "collect_in_slices", "too_large"]

#: The column holding each row's number while a batch is sliced (dropped after).
ROW = "_txcoord_row"

#: Slices a too-large batch is first cut into.
FIRST_SLICES = 4


def too_large(error: BaseException) -> bool:
    """Tell whether `error` is Spark refusing a job's results as larger than the driver takes."""
    return "maxResultSize" in str(error)


def collect(frame: DataFrame) -> pa.Table:
    """Return the rows of `frame` as one Arrow table, in slices if one job cannot bring them."""
    try:
        return frame.toArrow()
    except Exception as error:
        if not too_large(error):
            raise
        log.warning("a batch larger than spark.driver.maxResultSize: collecting it in slices")
    return collect_in_slices(frame)


def collect_in_slices(frame: DataFrame, slices: int = FIRST_SLICES) -> pa.Table:
    """Return the rows of `frame` as one Arrow table, brought back `slices` jobs at least."""
    started = time.monotonic()
    numbered = frame.withColumn(ROW, F.monotonically_increasing_id())
    stored = numbered.localCheckpoint(eager=True)
    try:
        total = stored.count()
        parts: list[pa.Table] = []
        pending = [(remainder, slices) for remainder in range(slices)]
        while pending:
            remainder, modulus = pending.pop()
            part = stored.where(F.pmod(F.xxhash64(ROW), F.lit(modulus)) == remainder)
            try:
                parts.append(part.toArrow())
            except Exception as error:
                # A slice of one row too large (hashes split rows apart long before that).
                if not too_large(error) or modulus >= 64 * max(total, 1):
                    raise
                # Rows with hash % m == r are those with hash % 2m in {r, r + m}.
                pending += [(remainder, 2 * modulus), (remainder + modulus, 2 * modulus)]
    finally:
        # A local checkpoint's blocks stay until released (the DataFrame has no cache entry).
        stored._jdf.queryExecution().analyzed().rdd().unpersist(False)
    table = pa.concat_tables(parts).drop_columns([ROW])
    log.warning(
        "collected a batch of %d rows (%.1f MiB) in %d slices in %.1f s",
        table.num_rows,
        table.nbytes / 2**20,
        len(parts),
        time.monotonic() - started,
    )
    return table
