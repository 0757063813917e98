"""Running the `xlabench` command as a user would, for tests that need a real process (Ctrl-C)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time


def interrupt_after(
    arguments: list[str], seconds: float, environment: dict[str, str], ready: str | None = None
) -> tuple[int, str]:
    """Run `xlabench ARGUMENTS`, press Ctrl-C; return the exit code and last stderr line.

    Ctrl-C comes once stderr matches the regex `ready` (the command is where the test wants it), or,
    without one, after `seconds`; `seconds` is also the longest wait for `ready`. Ctrl-C in a terminal
    signals the whole process group: the command and every process it started. pytest-xdist workers
    ignore SIGINT, and the command must not inherit that.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "xlabench.cli", *arguments],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, **environment},
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    chunks: list[bytes] = []

    def read() -> None:  # progress bars redraw with \r: read bytes as they come, not lines
        assert process.stderr is not None
        while chunk := os.read(process.stderr.fileno(), 65536):
            chunks.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and process.poll() is None:
        if ready is not None and re.search(ready, b"".join(chunks).decode(errors="replace")):
            break
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)
    process.wait(timeout=120)
    reader.join(timeout=10)
    lines = b"".join(chunks).decode(errors="replace").replace("\r", "\n").strip().splitlines()
    return process.returncode, lines[-1] if lines else ""
