"""Whether a running JVM of the product starts from the install step's class archive.

A JVM given an archive that does not fit starts without it, silently (coordinator/
class_archives.py); so the check reads the JVM's own command line from /proc and asks a
fresh JVM with `-Xshare:on` (which refuses to start when the archive does not fit) to map the
same archive with the same class path.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from coordinator.runtime import class_archives


def command_line(pid: int) -> list[str]:
    """Return the arguments of process `pid`."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")


def maps(archive: Path, classpath: str) -> subprocess.CompletedProcess[str]:
    """Start `java -version` that must map `archive` for `classpath`; return how it ended."""
    java = shutil.which("java")
    assert java is not None, "java is not on PATH"
    command = [java, "-Xshare:on", f"-XX:SharedArchiveFile={archive}", "-cp", classpath, "-version"]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


def assert_starts_from_archive(pid: int, name: str) -> None:
    """Assert that JVM `pid` was given the archive of kind `name` and that it fits."""
    archive = class_archives.archive(name)
    assert archive.is_file(), f"no {archive}: the install step (deploy/install.sh) records it"
    arguments = command_line(pid)
    assert f"-XX:SharedArchiveFile={archive}" in arguments, arguments
    classpath = arguments[arguments.index("-cp") + 1]
    fits = maps(archive, classpath)
    assert fits.returncode == 0, fits.stdout + fits.stderr
    # The check can fail: the same archive with another class path does not map.
    other = maps(archive, classpath.split(":", 1)[1])
    assert other.returncode != 0, other.stdout + other.stderr
