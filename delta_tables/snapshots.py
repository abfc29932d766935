"""Up-to-date snapshots of one Delta table, shared by many reader threads without a lock
held across the warehouse's I/O.

A reader asks for the table as of now: every commit made before it asked must be in what it
reads (a client that saw its transaction committed, then looks it up, must see it so). Before,
each reader took the table's lock, brought the table up to date (listing its log: I/O) and
read its files (more I/O) under it, so lookups queued one behind the other on every table, and
on a slow warehouse one token's flood of lookups held everyone's (issue 61, finding 4). Now:

    refresh     one reader at a time brings the table up to date (delta-rs's
                `update_incremental`) and publishes a snapshot: a pyarrow dataset of the
                version it reached, immutable, which any number of threads scan at once
    coalesce    a reader that comes while a refresh runs waits for the next one, which
                begins after it came (that one, not the running one, is sure to hold every
                commit made before it asked); all who wait meanwhile share that next
                refresh, so N readers cause at most two refreshes in a row, not N
    read        the reader scans the snapshot with its filter outside any lock; the waits
                are on a condition, and the table object is touched only by the refresher
                (delta-rs holds its own lock on a table while it updates: a reader calling
                it then would wait for that I/O too)

A refresh that fails is raised to its own reader, and to those who waited for it as
SnapshotUnavailableError (an OSError: the warehouse could not be read); the next reader
tries again. A table that does not exist yet is None until a refresh finds it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pyarrow.dataset as ds
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

__all__ = ["SnapshotUnavailableError", "TableSnapshots"]


class SnapshotUnavailableError(OSError):
    """The refresh another reader ran for this one failed."""


class TableSnapshots:
    """Fresh snapshots of one Delta table (see the module docstring); thread-safe."""

    def __init__(self, open_table: Callable[[], DeltaTable]) -> None:
        """`open_table` loads the table at its newest version, or raises TableNotFoundError."""
        self._open = open_table
        self._table: DeltaTable | None = None  # the refresher's alone
        self._changed = threading.Condition()
        self._begun = 0  # refreshes begun
        self._ended = 0  # refreshes ended, each with its outcome published
        self._running = False
        self._snapshot: ds.Dataset | None = None
        self._failure: BaseException | None = None

    def fresh(self) -> ds.Dataset | None:
        """Return a snapshot holding every commit made before this call (None: no table)."""
        with self._changed:
            wanted = self._begun + 1  # the first refresh to begin after this call
            while self._running and self._ended < wanted:
                self._changed.wait()
            if self._ended >= wanted:
                return self._outcome()
            # None runs and `wanted` has not begun (it would have ended): this thread runs it.
            self._begun += 1
            self._running = True
        try:
            snapshot = self._refresh()
        except BaseException as exc:
            self._publish(None, exc)
            raise
        self._publish(snapshot, None)
        return snapshot

    def _publish(self, snapshot: ds.Dataset | None, failure: BaseException | None) -> None:
        with self._changed:
            self._snapshot, self._failure = snapshot, failure
            self._ended += 1
            self._running = False
            self._changed.notify_all()

    def _outcome(self) -> ds.Dataset | None:
        """Return the newest refresh's snapshot, or raise its failure (lock held)."""
        if self._failure is not None:
            raise SnapshotUnavailableError(
                f"the table could not be read: {self._failure}"
            ) from self._failure
        return self._snapshot

    def _refresh(self) -> ds.Dataset | None:
        """Bring the table up to date and return its snapshot (None: it does not exist)."""
        try:
            if self._table is None:
                self._table = self._open()
            else:
                self._table.update_incremental()
        except TableNotFoundError:
            return None
        return self._table.to_pyarrow_dataset()
