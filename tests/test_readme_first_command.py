"""The README's first command, run the way a new user runs it (contract 4).

A fresh copy of the checkout, the working directory at its root, the command exactly as the
README prints it (no path options), then the README's curl round trip (send, commit, read
COMMITTED) and Ctrl-C. Every test elsewhere passes absolute paths; this one is what caught a
relative default warehouse that Delta refused.

The copy gets the install step's outputs (`.venv`, `.cache`) as symbolic links, so the
README's `make up` runs its install step (which finds itself up to date) and then
`txcoord up`; nothing else is shared with the checkout the tests run from. The checkout's
own install runs first, so that it is: a copy that found the shared environment stale would
install itself into it (the `txcoord` script and the editable package pointing into the
copy, broken once the copy is deleted), which the test then refuses.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from coordinator.runtime.artifacts import PROJECT_ROOT

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.long]

README = PROJECT_ROOT / "README.md"
#: The port the README's curl commands use.
README_PORT = 8080


def readme_block(after: str) -> str:
    """Return the first ```bash block that follows the line containing `after`."""
    text = README.read_text()
    start = text.index(after)
    match = re.search(r"```bash\n(.*?)```", text[start:], re.DOTALL)
    assert match is not None, f"no bash block after {after!r} in the README"
    return match.group(1)


def first_command() -> str:
    """Return the README's command that sets up and runs the stack, comment stripped."""
    lines = readme_block("## Two commands").splitlines()
    return lines[0].split("#", 1)[0].strip()


def curl_commands() -> list[str]:
    """Return the README's curl round trip, one shell command each (continuations joined)."""
    text = readme_block("Try it from another terminal").replace("\\\n", " ")
    commands = []
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("curl"):
            commands.append(re.sub(r"\s+#.*$", "", line))
    return commands


def fresh_copy(destination: Path) -> Path:
    """Copy the checkout's files (tracked and untracked, not ignored) into `destination`."""
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=PROJECT_ROOT,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, listed):
        source = PROJECT_ROOT / name
        if source.is_file() and not source.is_symlink():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    for made_by_install in (".venv", ".cache"):
        (destination / made_by_install).symlink_to(PROJECT_ROOT / made_by_install)
    return destination


def port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class Terminal:
    """A command in its own process group, its output read line by line.

    The output is whole once the reader has reached its end (the process exiting comes
    first: its last lines may still be on their way to the queue)."""

    def __init__(self, command: str, cwd: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            command,
            shell=True,
            cwd=cwd,
            env=env,
            text=True,
            start_new_session=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def text(self) -> str:
        while not self.lines.empty():
            self.output.append(self.lines.get())
        return "".join(self.output)

    def wait_for(self, pattern: str, timeout: float) -> None:
        """Return once a line matches `pattern`; fail if the command ends or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                if not self._reader.is_alive() and self.lines.empty():  # its output ended
                    pytest.fail(f"the command ended before {pattern!r}:\n{self.text()[-6000:]}")
                continue
            self.output.append(line)
            if re.search(pattern, line):
                return
        pytest.fail(f"no {pattern!r} within {timeout:.0f} s:\n{self.text()[-6000:]}")

    def interrupt(self) -> int:
        """Press Ctrl-C (SIGINT to the whole process group); return the exit code once all
        of the output has been read."""
        os.killpg(self.process.pid, signal.SIGINT)
        code = self.process.wait(180)
        self._reader.join(60)
        return code

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(60)


def install_checkout() -> None:
    """Run the checkout's install step, so that the copy's finds everything up to date."""
    done = subprocess.run(
        ["bash", "deploy/install.sh"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert done.returncode == 0, f"the checkout's install failed:\n{done.stdout}{done.stderr}"


def installed_anything(output: list[str]) -> list[str]:
    """Return the copy's install lines that did something (all should say "up to date")."""
    return [
        line
        for line in output
        if line.startswith("[install]")
        and "up to date" not in line
        and line.strip() != "[install] ready"
    ]


def shell(command: str, cwd: Path) -> str:
    done = subprocess.run(
        command, shell=True, cwd=cwd, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
    return done.stdout


@pytest.mark.timeout(1800)  # the checkout's own install first: minutes, if it was stale
def test_readme_first_command_on_a_fresh_copy_then_the_curl_round_trip(tmp_path: Path) -> None:
    install_checkout()
    command = first_command()
    assert command == "make up", command  # the README's promise this test holds it to
    send, commit, read = curl_commands()
    checkout = fresh_copy(tmp_path / "checkout")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXCOORD_")}
    if not port_is_free(README_PORT):  # not a path option: only where 8080 is taken
        port = 18080 + os.getpid() % 1000
        env["TXCOORD_REST__PORT"] = str(port)
        send, commit, read = (
            c.replace(f":{README_PORT}/", f":{port}/") for c in (send, commit, read)
        )
    up = Terminal(command, checkout, env)
    try:
        up.wait_for(r"txcoord is up: ", timeout=420)
        # The copy's install wrote nothing into the environment it shares with the checkout.
        assert installed_anything(up.output) == [], up.text()[-4000:]
        sent = json.loads(shell(send, checkout))
        assert sent["status"] == "PREPARED", sent
        tx = sent["transaction_id"]
        committed = json.loads(shell(commit.replace("3f…", tx), checkout) or "{}")
        assert committed.get("status", "COMMIT") != "error", committed
        state = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            state = json.loads(shell(read.replace("3f…", tx), checkout)).get("state")
            if state == "COMMITTED":
                break
            time.sleep(1)
        assert state == "COMMITTED", up.text()[-4000:]
        code = up.interrupt()
        output = up.text()
        assert "stopped cleanly" in output, output[-4000:]
        # make (or the shell running it) exits on SIGINT itself; txcoord has said it stopped.
        assert code in (0, 2, -signal.SIGINT), output[-4000:]
    finally:
        up.kill()
    # Everything the stack made is under the working directory, where the README says.
    assert (checkout / "warehouse" / "system" / "half_messages" / "_delta_log").is_dir()
    assert (checkout / "warehouse" / "topics" / "OrderPaid" / "_delta_log").is_dir()
    assert (checkout / "var" / "checkpoints").is_dir()
    assert (checkout / "var" / "kafka").is_dir()
