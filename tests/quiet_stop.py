"""What an orderly stop must not print, for the tests that stop a real process.

A Ctrl-C or SIGTERM of `txcoord up` or of the coordinator application is an ordinary stop:
its output (stdout and stderr) may say what it stops, never read like a crash.
"""

from __future__ import annotations

#: A Java stack overflow (Spark's stop detection over a huge message), a Python or Java
#: traceback, an interrupted py4j call, an ERROR line from Spark, py4j or txcoord, and
#: Spark's warning that a stopped query had no job to cancel (expected, so filtered).
NOISE = (
    "StackOverflowError",
    "Traceback",
    "InterruptedException",
    " ERROR ",
    "Exception in thread",
    "Cannot find active jobs",
)


def noise_in(output: str) -> list[str]:
    """Return the kinds of noise found in `output` (empty when the stop was quiet)."""
    return [word for word in NOISE if word in output]
