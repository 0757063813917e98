"""`xlabench retrain` interrupted: Ctrl-C stops it at once and leaves the stored versions as they were."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def test_ctrl_c_leaves_the_last_good_version_untouched(small_graph, tmp_path):
    policies = tmp_path / "policies"
    version = policies / "tiny" / "v1.0"
    version.mkdir(parents=True)
    (version / "metadata.json").write_text('{"format": 1}')
    before = {path: path.read_bytes() for path in policies.rglob("*") if path.is_file()}
    command = [sys.executable, "-m", "xlabench.cli", "retrain", "--name", "tiny", "--graphs", small_graph,
               "--steps", "100000", "--warm-start", "none", "--eval-graphs", ""]  # fmt: skip
    environment = {**os.environ, "XLABENCH_POLICIES_DIR": str(policies)}
    # Ctrl-C in a terminal signals the whole process group: the command, its environment processes
    # and their compiler workers. pytest-xdist workers ignore SIGINT; the child must not inherit that.
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    time.sleep(25)  # into training: environments up, steps running
    os.killpg(process.pid, signal.SIGINT)
    _, error = process.communicate(timeout=120)
    assert process.returncode == 130
    assert error.replace("\r", "\n").strip().splitlines()[-1] == "xlabench: interrupted"
    after = {path: path.read_bytes() for path in policies.rglob("*") if path.is_file()}
    assert after == before and [p.name for p in (policies / "tiny").iterdir()] == ["v1.0"]
