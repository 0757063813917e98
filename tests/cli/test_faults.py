"""Faults from outside -- a compiler worker killed (the out-of-memory killer) -- as a user meets them:
one line naming what failed, a reproducer, a non-zero exit; never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, frontier = [], [pid]
    while frontier:
        for child in children.get(frontier.pop(), []):
            found.append(child)
            frontier.append(child)
    return found


def _is_worker(pid: int) -> bool:
    try:
        return b"xlabench.xla.worker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_a_worker_killed_while_it_discovers_the_pipeline_is_one_line_and_a_reproducer(tmp_path):
    # An empty cache: `xlabench passes` must discover the catalogue, in a worker of its own.
    environment = {**os.environ, "XLABENCH_CACHE_DIR": str(tmp_path / "cache")}
    process = subprocess.Popen(
        [sys.executable, "-m", "xlabench.cli", "passes"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=environment,
    )  # fmt: skip
    deadline, killed = time.monotonic() + 120, False
    while not killed and time.monotonic() < deadline and process.poll() is None:
        for pid in filter(_is_worker, _descendants(process.pid)):
            os.kill(pid, signal.SIGKILL)
            killed = True
        time.sleep(0.05)
    _, stderr = process.communicate(timeout=300)
    assert killed, "no compiler worker was seen"
    lines = stderr.strip().splitlines()
    assert process.returncode == 2 and len(lines) == 1, stderr
    assert lines[0].startswith("xlabench: error: compiler crash in pass @discover-pipeline"), lines[0]
    assert "compiler process died (signal 9)" in lines[0] and "reproducer: " in lines[0]
    reproducer = lines[0].split("reproducer: ", 1)[1].split(")", 1)[0]
    assert (Path(reproducer) / "error.json").exists()
