"""One worker process: it serves only the functions of the compiler registry and leaves nothing behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from xlabench.xla.compilers import worker_handle
from xlabench.xla.compilers.worker_handle import RefusedCall, Worker


def test_a_worker_runs_only_registered_functions():
    worker = Worker()
    try:
        # A module-level helper of the worker's code is not callable by name: only the registry is.
        for name in ("parse", "os", "__import__", "no_such_function"):
            with pytest.raises(RefusedCall, match=f"no compiler function '{re.escape(name)}'"):
                worker.call(name, {}, timeout=120)
        assert worker.alive()  # a refusal is an answer: the worker goes on serving
        assert worker.call("jaxlib_version", {}, timeout=120)
    finally:
        worker.close()


def test_a_workers_log_lives_in_the_cache_is_kept_small_and_goes_on_close(tmp_path, monkeypatch):
    monkeypatch.setenv("XLABENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(worker_handle, "LOG_LIMIT_BYTES", 1000)
    worker = Worker()
    try:
        log = Path(worker.stderr_path)
        assert log.parent == tmp_path / "cache" / "worker-logs"
        assert log.name.startswith(f"xlabench-worker-{os.getpid()}-")
        with open(log, "ab") as handle:  # as if XLA had logged a lot on earlier calls
            handle.write(b"W earlier warning\n" * 1000)
        assert worker.call("jaxlib_version", {}, timeout=120)
        assert log.stat().st_size < 1000
    finally:
        worker.close()
    assert not log.exists() and not os.path.exists(worker.scratch_directory)


def test_what_the_workers_of_a_killed_process_left_goes_and_a_running_ones_stays(tmp_path):
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead = int(finished.stdout)
    (tmp_path / f"xlabench-worker-{dead}-abc.log").write_text("left")
    (tmp_path / f"xlabench-worker-{dead}-scratch").mkdir()
    (tmp_path / f"xlabench-worker-{os.getpid()}-def.log").write_text("in use")
    (tmp_path / "someone-elses.log").write_text("not ours")
    removed = worker_handle.remove_left_behind(str(tmp_path))
    assert sorted(removed) == [f"xlabench-worker-{dead}-abc.log", f"xlabench-worker-{dead}-scratch"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "someone-elses.log",
        f"xlabench-worker-{os.getpid()}-def.log",
    ]
