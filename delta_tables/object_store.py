"""A table's folder on local disk or on an S3 API, listed and read with Arrow's file systems.

What delta-rs and Spark's s3a reach through the standard AWS_* variables (endpoint, region,
credentials), this reaches through the same ones: a start lists the warehouse's tables and
their logs' versions without a JVM, wherever the warehouse is.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.fs as pafs

#: Hadoop's and delta-rs's names of an S3 API.
S3_SCHEMES = ("s3a://", "s3://")


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """Return (Arrow file system, path in it) of a local folder or an `s3a://` location."""
    if location.startswith(S3_SCHEMES):
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        s3 = pafs.S3FileSystem(
            endpoint_override=endpoint.split("://", 1)[1] if endpoint else None,
            scheme=endpoint.split("://", 1)[0] if endpoint else "https",
            region=region,
        )
        return s3, location.split("://", 1)[1].rstrip("/")
    return pafs.LocalFileSystem(), str(Path(location.removeprefix("file:")).resolve())


def listing(fs: pafs.FileSystem, folder: str) -> list[pafs.FileInfo]:
    """Return what `folder` holds (nothing if it does not exist), sorted by path."""
    try:
        found = fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
    except FileNotFoundError:
        return []
    return sorted(found, key=lambda info: info.path)


def commit_files(fs: pafs.FileSystem, table: str) -> list[pafs.FileInfo]:
    """Return the commit files of the log of `table` (a path in `fs`), oldest first."""
    commits = [
        info
        for info in listing(fs, f"{table}/_delta_log")
        if info.base_name.endswith(".json") and info.base_name[:-5].isdigit()
    ]
    return sorted(commits, key=lambda info: int(info.base_name[:-5]))
