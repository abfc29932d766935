"""Files that hold a secret must be readable by their owner only, as ssh asks of a key.

The REST ingress's token file, a Kafka password file (`kafka.sasl_password_file`, or one named
by the local stack's auth file) and a TLS private key (`kafka.ssl_keyfile`): on a shared
machine a mode that lets the group or others read one makes its secret theirs, and a mode
that lets them write one lets them replace it. Such a file is refused at start with the
`chmod` that fixes it, never read and used anyway.
"""

from __future__ import annotations

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
