"""Files that hold a secret must be readable by their owner only, as ssh asks of a key.

The REST ingress's token file, a Kafka password file (`kafka.sasl_password_file`, or one named
by the local stack's auth file) and a TLS private key (`kafka.ssl_keyfile`): on a shared
machine a mode that lets the group or others read one makes its secret theirs, and a mode
that lets them write one lets them replace it. Such a file is refused at start with the
`chmod` that fixes it, never read and used anyway.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def private_file_problem(path: Path, what: str) -> str | None:
    """Return why the secret file `path` (named `what` in the message) is unsafe, or None.

    A file that cannot be examined (absent, unreadable) is not this check's concern: the
    caller reports it in its own words.
    """
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if mode & 0o077:
        return (
            f"{what} {path} is readable or writable by group or others (mode "
            f"{stat.S_IMODE(mode):o}): its secret would be theirs; run chmod 600 {path}"
        )
    return None


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path`, readable by its owner only from the first byte on.

    Written first and `chmod`ed after, a file holds its secret under the umask's mode for a
    moment (0644 by default: anyone's to read); an existing file is made private before its
    new content goes in.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a file that existed keeps its mode through os.open
        os.write(fd, text.encode())
    finally:
        os.close(fd)
