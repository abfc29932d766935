"""An S3 API on loopback for tests: moto's server (PyPI `moto[server]`), one bucket per test.

delta-rs reaches it through the standard AWS_* environment variables (endpoint, plain HTTP,
dummy credentials), as it would reach a real object store; a test sets them for its own
duration. moto keeps every object in memory and honours conditional writes
(`If-None-Match: *`), which is what delta-rs commits with.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from coordinator.runtime.local_stack.ports import free_port
from coordinator.runtime.spark_session import s3a_conf

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: A request in the server's log: `127.0.0.1 - - [28/Nov/2026 16:27:55] "PUT /b/k HTTP/1.1" 200 -`.
REQUEST_LINE = re.compile(r'\[(\d\d/\w{3}/\d{4} [\d:]{8})\] "([A-Z]+) ')
#: Terminal colours werkzeug puts around some lines.
ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: Seconds moto's server may take to answer its first request.
START_BOUND = 30.0


class S3Server:
    """A moto server process; `bucket()` makes a new bucket in it."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        server = shutil.which("moto_server", path=str(Path(sys.executable).parent))
        if server is None:
            raise FileNotFoundError("moto_server is not installed: pip install 'txcoord[cluster]'")
        self.log_path = log_dir / "moto.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [server, "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + START_BOUND
        while True:
            try:
                urllib.request.urlopen(self.endpoint, timeout=2).read()
                return
            except (urllib.error.URLError, ConnectionError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"moto's server did not answer on {self.endpoint}") from None
                time.sleep(0.2)

    def bucket(self, name: str | None = None) -> str:
        """Create bucket `name` (default: a fresh name); return its name."""
        name = name or f"txcoord-{uuid.uuid4().hex[:12]}"
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        urllib.request.urlopen(request, timeout=10).read()
        return name

    def environment(self) -> dict[str, str]:
        """Return the AWS_* variables that point delta-rs and s3a at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
        }

    def configure(self, spark: SparkSession) -> None:
        """Point the running session's s3a file system at this server: the session's JVM
        started before a test set the AWS_* variables, so they are given to Hadoop instead."""
        hadoop = spark.sparkContext._jsc.hadoopConfiguration()
        environment = self.environment()
        for key, value in s3a_conf(environment).items():
            hadoop.set(key.removeprefix("spark.hadoop."), value)
        hadoop.set("fs.s3a.access.key", environment["AWS_ACCESS_KEY_ID"])
        hadoop.set("fs.s3a.secret.key", environment["AWS_SECRET_ACCESS_KEY"])

    def requests_between(self, start: float, end: float) -> dict[str, int]:
        """Return how many requests of each HTTP method the server logged from `start` to
        `end` (epoch seconds; its log has whole seconds, so both ends are taken whole)."""
        counts: Counter[str] = Counter()
        for line in self.log_path.read_text(errors="replace").splitlines():
            found = REQUEST_LINE.search(ANSI.sub("", line))
            if found is None:
                continue
            at = datetime.strptime(found.group(1), "%d/%b/%Y %H:%M:%S").timestamp()
            if int(start) <= at <= end:
                counts[found.group(2)] += 1
        return dict(sorted(counts.items()))

    def stop(self) -> None:
        """Stop the server."""
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()
