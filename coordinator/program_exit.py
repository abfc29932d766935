"""How txcoord's programs end: output flushed, then at once, without native teardown.

pyarrow's and delta-rs's thread pools, torn down at interpreter exit, now and then abort the
process with "terminate called without an active exception" (SIGABRT, delta-io/delta-rs#2184)
after the program had done its work and said so. Both the `txcoord` command and the Spark
application (coordinator/app.py, which reads Delta logs with delta-rs) therefore leave with
`os._exit` once their logs and standard streams are flushed. Each releases what it holds
(producers closed, Spark stopped, stacks shut down) before it gets here.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import NoReturn


def leave(code: int) -> NoReturn:
    """Flush the logs and the standard streams, then end the process with `code`."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
