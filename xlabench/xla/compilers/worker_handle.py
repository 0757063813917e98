"""A compiler worker process seen from its caller: start it, call a registered function, read its stderr.

The worker (`python -m xlabench.xla.worker`) runs only the functions of
`xlabench.xla.worker.registry.REGISTRY`. Its stderr (where XLA logs and CHECK failures go) goes to a
file under the cache directory (`worker-logs/`), so a crash comes back as an exit code plus the tail of
that file. The pool of such workers is `xlabench.xla.compilers.worker_pool`.

Nothing is left behind: a worker's log and scratch folder go when it is closed, a log is cut back when
it grows past `LOG_LIMIT_BYTES`, and what the workers of a killed process left (it could not clean up)
goes when the next process starts one. Both names carry the owning process's id for that.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from typing import Any

from xlabench.settings import SCRATCH_DIRECTORY_VARIABLE
from xlabench.xla.shared.cache_directory import cache_directory
from xlabench.xla.shared.failures import CompilerFailure, DriverFailure, TransientFailure
from xlabench.xla.shared.releases import UnsupportedCompiler

_STDERR_TAIL_BYTES = 4000
# A worker's log is emptied before a call once it is this large: the tail a failure reports is the
# call's own output, so nothing older is needed.
LOG_LIMIT_BYTES = 1 << 20
_PREFIX = "xlabench-worker-"
# XLA prints a banner of INFO lines per process; keep worker logs to warnings and worse.
_WORKER_ENVIRONMENT = {"TF_CPP_MIN_LOG_LEVEL": "1", "JAX_PLATFORMS": "cpu"}
_DROPPED_VARIABLES = ("XLA_FLAGS", "TF_XLA_FLAGS")


def _inherited_environment() -> dict[str, str]:
    """The caller's environment minus what would change XLA's behaviour behind the cache's back.

    `XLA_FLAGS` (e.g. --xla_dump_to, --xla_disable_hlo_passes) and TF_XLA_FLAGS would alter results
    without altering any cache key; the driver passes every option it needs explicitly.
    """
    return {key: value for key, value in os.environ.items() if key not in _DROPPED_VARIABLES}


def _scratch_base() -> str:
    """Where workers' dump folders go: in memory when /dev/shm exists, else the temp directory."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        return "/dev/shm"
    return tempfile.gettempdir()


def log_directory() -> str:
    """Where worker logs go: `worker-logs/` in the cache directory, or the temp directory when that
    cannot be written (a cache that cannot be written runs without; the log is removed on close)."""
    path = os.path.join(cache_directory(), "worker-logs")
    with contextlib.suppress(OSError):
        os.makedirs(path, exist_ok=True)
    return path if os.access(path, os.W_OK) else tempfile.gettempdir()


def _process_running(pid: int) -> bool:
    """Whether a process with this id exists (one of another user's counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def remove_left_behind(directory: str) -> list[str]:
    """Remove the logs and scratch folders in `directory` whose owning process no longer runs; their names."""
    removed = []
    with contextlib.suppress(OSError):
        for name in os.listdir(directory):
            owner = name[len(_PREFIX) :].split("-")[0] if name.startswith(_PREFIX) else ""
            if not owner.isdigit() or _process_running(int(owner)):
                continue
            path = os.path.join(directory, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    os.unlink(path)
            removed.append(name)
    return removed


_swept: set[str] = set()
# Workers not closed yet: closed when this process exits, so that a pool nobody closed (a test's, a
# script's) leaves no log or dump folder behind either.
_live: set[Worker] = set()


@atexit.register
def _close_live_workers() -> None:
    """At exit: stop every worker still open, and remove its log and scratch folder."""
    for worker in list(_live):
        with contextlib.suppress(Exception):
            worker.close()


def _sweep_once() -> None:
    """Once per process: remove what the workers of processes that no longer run left behind."""
    for directory in (log_directory(), _scratch_base()):
        if directory not in _swept:
            _swept.add(directory)
            remove_left_behind(directory)


def _worker_python_path(scratch_directory: str, python: str | None, inherited: str | None) -> str:
    """PYTHONPATH of a worker: it must import this very xlabench, installed or not.

    Under this interpreter, the folder that holds the package goes first. Under another one (a managed
    compiler), that folder may be a site-packages with its own jax: only a link to the package goes,
    made in the worker's scratch folder, and the caller's PYTHONPATH stays out.
    """
    # xlabench/xla/compilers/worker_handle.py -> xlabench/
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if python is None or python == sys.executable:
        return os.pathsep.join(p for p in (os.path.dirname(package), inherited) if p)
    linked = os.path.join(scratch_directory, "path")
    os.makedirs(linked)
    os.symlink(package, os.path.join(linked, "xlabench"))
    return linked


class RefusedCall(Exception):
    """The worker does not run a function of that name (it is not in
    `xlabench.xla.worker.registry.REGISTRY`)."""


class WorkerDied(Exception):
    """The worker process died during a call (CHECK abort, segfault, out of memory)."""

    def __init__(self, exit_code: int | None, stderr_tail: str) -> None:
        self.exit_code = exit_code
        self.stderr_tail = stderr_tail
        signal_note = (
            f"signal {-exit_code}" if exit_code is not None and exit_code < 0 else f"exit {exit_code}"
        )
        super().__init__(f"compiler process died ({signal_note})")


class WorkerTimedOut(Exception):
    """The call did not finish in time; the worker was killed."""

    def __init__(self, seconds: float, stderr_tail: str) -> None:
        self.seconds = seconds
        self.stderr_tail = stderr_tail
        super().__init__(f"compiler call did not finish within {seconds:g} s")


class Worker:
    """One compiler process and its pipe."""

    def __init__(self, environment: dict[str, str] | None = None, python: str | None = None) -> None:
        _sweep_once()
        owned = f"{_PREFIX}{os.getpid()}-"
        descriptor, self.stderr_path = tempfile.mkstemp(prefix=owned, suffix=".log", dir=log_directory())
        # Appended to, so that the log can be emptied between calls (`LOG_LIMIT_BYTES`).
        os.close(descriptor)
        descriptor = os.open(self.stderr_path, os.O_WRONLY | os.O_APPEND)
        # The worker's dump folders live in this directory, owned (and removed) by the parent, so a
        # killed worker leaves nothing behind.
        self.scratch_directory = tempfile.mkdtemp(prefix=owned, dir=_scratch_base())
        parent_socket, child_socket = socket.socketpair()
        settings = {**_inherited_environment(), **_WORKER_ENVIRONMENT, **(environment or {})}
        settings[SCRATCH_DIRECTORY_VARIABLE] = self.scratch_directory
        settings["PYTHONPATH"] = _worker_python_path(
            self.scratch_directory, python, settings.get("PYTHONPATH")
        )
        self.process = subprocess.Popen(
            [python or sys.executable, "-m", "xlabench.xla.worker", str(child_socket.fileno())],
            pass_fds=(child_socket.fileno(),),
            stdin=subprocess.DEVNULL,
            stdout=descriptor,
            stderr=descriptor,
            env=settings,
        )
        os.close(descriptor)
        child_socket.close()
        self._connection = Connection(parent_socket.detach())
        self._request_ids = itertools.count(1)
        _live.add(self)

    def call(self, function_name: str, arguments: dict[str, Any], timeout: float) -> Any:
        """Run the registered compiler function `function_name` on `arguments` in the worker; its result.

        Every request carries an id and its reply the same id: a reply to an earlier request that
        was abandoned (an interrupted caller) is read and dropped, never taken for this answer.
        """
        log_offset = os.path.getsize(self.stderr_path)
        if log_offset > LOG_LIMIT_BYTES:
            with contextlib.suppress(OSError):
                os.truncate(self.stderr_path, 0)
                log_offset = 0
        request_id = next(self._request_ids)
        deadline = time.monotonic() + timeout
        try:
            self._connection.send((request_id, function_name, arguments))
            while True:
                if not self._connection.poll(max(0.0, deadline - time.monotonic())):
                    self.kill()
                    raise WorkerTimedOut(timeout, self.stderr_since(log_offset))
                reply_id, status, payload = self._connection.recv()
                if reply_id == request_id:
                    break
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            try:
                exit_code = self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
                exit_code = self.process.returncode
            raise WorkerDied(exit_code, self.stderr_since(log_offset)) from None
        if status == "failure":
            raise CompilerFailure(payload)
        if status == "transient":
            raise TransientFailure(payload)
        if status == "driver":
            raise DriverFailure(payload)
        if status == "unsupported":
            raise UnsupportedCompiler(payload)
        if status == "refused":
            raise RefusedCall(payload)
        return payload

    def stderr_since(self, offset: int) -> str:
        """The tail of what the worker wrote to stderr since `offset`."""
        try:
            with open(self.stderr_path, "rb") as handle:
                handle.seek(max(offset, os.path.getsize(self.stderr_path) - _STDERR_TAIL_BYTES))
                return handle.read().decode(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        """True while the process runs."""
        return self.process.poll() is None

    def kill(self) -> None:
        """Stop the process at once."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()

    def close(self) -> None:
        """Stop the process (closing its pipe asks it to exit) and remove its log."""
        _live.discard(self)
        with contextlib.suppress(OSError):
            self._connection.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
        with contextlib.suppress(OSError):
            os.unlink(self.stderr_path)
        shutil.rmtree(self.scratch_directory, ignore_errors=True)
