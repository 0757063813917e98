"""Running the `xlabench` command as a user would, for tests that need a real process (Ctrl-C)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def interrupt_after(arguments: list[str], seconds: float, environment: dict[str, str]) -> tuple[int, str]:
    """Run `xlabench ARGUMENTS`, press Ctrl-C after `seconds`; return the exit code and last stderr line.

    Ctrl-C in a terminal signals the whole process group: the command and every process it started.
    pytest-xdist workers ignore SIGINT, and the command must not inherit that.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "xlabench.cli", *arguments],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **environment},
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(seconds)
    os.killpg(process.pid, signal.SIGINT)
    _, error = process.communicate(timeout=120)
    lines = error.replace("\r", "\n").strip().splitlines()
    return process.returncode, lines[-1] if lines else ""
