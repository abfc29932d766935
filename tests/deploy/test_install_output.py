"""The install step's Maven runs print no escape codes (Maven 3.8 writes ESC[0m in batch mode)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(shutil.which("mvn") is None, reason="no Maven on this machine")
def test_the_install_steps_maven_prints_no_escape_codes(tmp_path: Path) -> None:
    # The install step's own `maven` function, run on its smallest POM from the local cache.
    script = (
        'set -euo pipefail; eval "$(sed -n "/^maven() {/,/^}/p" deploy/install.sh)"; '
        "maven -s deploy/jvm/maven-settings.xml -f deploy/jvm/kafka-broker.pom.xml "
        '-Dmaven.repo.local="$M2" dependency:copy-dependencies -DincludeScope=runtime '
        '-DoutputDirectory="$OUT"'
    )
    env = os.environ | {"M2": str(ROOT / ".cache" / "m2"), "OUT": str(tmp_path / "jars")}
    done = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert any((tmp_path / "jars").glob("*.jar"))
    assert b"\x1b" not in done.stdout + done.stderr
    assert done.stdout + done.stderr == b""
