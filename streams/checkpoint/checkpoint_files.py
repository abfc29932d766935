"""Reading and writing a streaming checkpoint's small files, on a local disk or any Hadoop path.

The coordinator's checkpoint (streams/checkpoint/generations.py) is read before Spark starts
(a local one: a refused configuration must not cost a session's start-up) and through
Hadoop's FileSystem once it runs (s3a:// and the rest): both through `Files`, so that what
is read is decided in one place.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Protocol

from pyspark.sql import SparkSession


class Files(Protocol):
    """The files below one folder (`root`), addressed by relative names."""

    root: str

    def names(self, folder: str = "") -> list[str]:
        """Return the names of the entries of `folder` ([] when it does not exist)."""

    def text(self, name: str) -> str | None:
        """Return the whole text of file `name`, None when it does not exist."""

    def write_new(self, name: str, text: str) -> None:
        """Write file `name` whole and at once: readers see all of it or none of it."""

    def delete(self, name: str) -> None:
        """Delete file or folder `name` and everything below it (nothing if absent)."""


def is_local(location: str) -> bool:
    """Return True for a folder of this machine (no scheme, or file:)."""
    return "://" not in location or location.startswith("file:")


class LocalFiles:
    """`Files` of a folder of this machine, read with Python alone (no JVM)."""

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")
        self._path = Path(root.removeprefix("file://").removeprefix("file:"))

    def names(self, folder: str = "") -> list[str]:
        path = self._path / folder
        return sorted(entry.name for entry in path.iterdir()) if path.is_dir() else []

    def text(self, name: str) -> str | None:
        path = self._path / name
        return path.read_text(encoding="utf-8") if path.is_file() else None

    def write_new(self, name: str, text: str) -> None:
        path = self._path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written aside, synced, then renamed over: a kill -9 leaves the old file or the new.
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(out.name, path)

    def delete(self, name: str) -> None:
        path = self._path / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


class HadoopFiles:
    """`Files` of any Hadoop path (s3a://, hdfs://, file:), through the session's JVM."""

    def __init__(self, spark: SparkSession, root: str) -> None:
        self.root = root.rstrip("/")
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        self._jvm: Any = jvm
        path = jvm.org.apache.hadoop.fs.Path(self.root)
        self._fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())

    def _path(self, name: str) -> Any:
        return self._jvm.org.apache.hadoop.fs.Path(f"{self.root}/{name}" if name else self.root)

    def names(self, folder: str = "") -> list[str]:
        path = self._path(folder)
        if not self._fs.exists(path):
            return []
        return sorted(str(status.getPath().getName()) for status in self._fs.listStatus(path))

    def text(self, name: str) -> str | None:
        path = self._path(name)
        if not self._fs.exists(path):
            return None
        stream = self._fs.open(path)
        try:
            data = self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream)
        finally:
            stream.close()
        return bytes(data).decode("utf-8")

    def write_new(self, name: str, text: str) -> None:
        # One create-and-close: an object store's PUT is atomic; on HDFS the file appears
        # when closed. (Local folders are LocalFiles, which rename.)
        out = self._fs.create(self._path(name), True)
        try:
            out.write(text.encode("utf-8"))
        finally:
            out.close()

    def delete(self, name: str) -> None:
        self._fs.delete(self._path(name), True)


def files_of(location: str, spark: SparkSession | None = None) -> Files:
    """Return the `Files` of `location`: Python's for a local folder, else Hadoop's (which
    needs the session `spark`)."""
    if is_local(location):
        return LocalFiles(location)
    if spark is None:
        raise ValueError(f"{location} is read through Spark: pass the session")
    return HadoopFiles(spark, location)
