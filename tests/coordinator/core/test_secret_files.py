"""A secret file is private from its first byte: never written under the umask's mode first."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from coordinator.core.secret_files import private_file_problem, write_private


def test_a_new_secret_file_is_private_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o000)  # the most permissive: a plain write would make it 0666
    try:
        path = tmp_path / "server.properties"
        write_private(path, "sasl.jaas.config=secret\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == "sasl.jaas.config=secret\n"
    assert private_file_problem(path, "the file") is None


def test_an_existing_public_file_is_made_private_before_the_secret_goes_in(
    tmp_path: Path,
) -> None:
    path = tmp_path / "key.keystore.pem"
    path.write_text("old, public\n")
    path.chmod(0o644)
    fd = os.open(path, os.O_RDONLY)  # a reader that opened it before
    try:
        write_private(path, "-----BEGIN PRIVATE KEY-----\n")
        assert stat.S_IMODE(os.fstat(fd).st_mode) == 0o600
    finally:
        os.close(fd)
