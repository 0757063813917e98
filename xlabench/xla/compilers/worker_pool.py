"""Worker processes around the compiler: a CHECK abort, a segfault or a hang costs a worker, not the caller.

Each worker is a `python -m xlabench.xla.worker` process (`xlabench.xla.compilers.worker_handle.Worker`) that
serves calls by function name over a socket pair, running only the functions registered in
`xlabench.xla.worker.registry.REGISTRY`; a crash comes back as an exit code plus the tail of its stderr.
The pool is thread-safe: callers block until a worker is free; a dead or timed-out worker is
replaced on the next call.
"""

from __future__ import annotations

import atexit
import queue
import threading
from typing import Any

from xlabench.settings import BUILD_VARIABLE, DEFAULT_COMPILER_TIMEOUT_SECONDS, Settings, current
from xlabench.xla.compilers.named_compilers import Compiler, compiler_build, resolve_compiler
from xlabench.xla.compilers.worker_handle import RefusedCall, Worker, WorkerDied, WorkerTimedOut
from xlabench.xla.shared.failures import CompilerFailure, DriverFailure, TransientFailure
from xlabench.xla.shared.releases import UnsupportedCompiler

__all__ = [
    "CompilerFailure",
    "DriverFailure",
    "CompilerPool",
    "RefusedCall",
    "TransientFailure",
    "Worker",
    "WorkerDied",
    "WorkerTimedOut",
    "call_once",
    "default_pool",
]


class CompilerPool:
    """A fixed number of workers of one compiler, shared by threads; replaces workers that die.

    `compiler` (default: the settings' compiler, else the installed jaxlib) decides the interpreter the
    workers run under; `settings` (default: those in effect, `xlabench.settings.current`) where their
    caches are and how long a call may take; `environment` adds variables to the workers'.
    """

    def __init__(
        self,
        size: int = 1,
        environment: dict[str, str] | None = None,
        compiler: Compiler | None = None,
        settings: Settings | None = None,
    ) -> None:
        if size < 1:
            raise ValueError("a compiler pool needs at least one worker")
        self.size = size
        self.settings = settings or current()
        self.compiler = compiler or resolve_compiler(settings=self.settings)
        self.timeout = self.settings.compiler_timeout_seconds
        self._environment = {**self.settings.worker_environment(), **(environment or {})}
        self._idle: queue.Queue[Worker | None] = queue.Queue()
        for _ in range(size):
            self._idle.put(None)  # started lazily: a pool that is never used costs nothing
        self.crashes = 0
        self.timeouts = 0

    def call(self, function_name: str, timeout: float | None = None, **arguments: Any) -> Any:
        """Run one registered compiler function in a free worker (`timeout`: default the settings').

        Raises CompilerFailure, DriverFailure, WorkerDied, WorkerTimedOut, or RefusedCall for an
        unregistered name.
        """
        worker = self._idle.get()
        try:
            if worker is None or not worker.alive():
                if worker is not None:
                    worker.close()
                worker = Worker(self.worker_environment(), self.compiler.python)
            return worker.call(function_name, arguments, self.timeout if timeout is None else timeout)
        except (CompilerFailure, DriverFailure, UnsupportedCompiler, RefusedCall):
            raise  # an answer: the worker is fine
        except (WorkerDied, WorkerTimedOut) as failure:
            if isinstance(failure, WorkerDied):
                self.crashes += 1
            else:
                self.timeouts += 1
            worker.close()
            worker = None  # replaced on the next call
            raise
        except BaseException:
            # Anything else (Ctrl-C while waiting, a reply that cannot be read) leaves the worker
            # busy or out of step: stop it rather than hand it to the next caller.
            if worker is not None:
                worker.kill()
                worker.close()
            worker = None
            raise
        finally:
            self._idle.put(worker)

    def worker_environment(self) -> dict[str, str]:
        """What this pool's workers start with beyond the inherited environment: the compiler's own (XLA
        options, build acceptance), the settings' (caches, timing slot), the pool's extra, the build."""
        return {
            **self.compiler.worker_environment(),
            **self._environment,
            BUILD_VARIABLE: compiler_build(self.compiler),
        }

    def worker_pids(self) -> list[int]:
        """Process ids of the live idle workers (for diagnostics: who to look at, or stop)."""
        with self._idle.mutex:
            return [
                worker.process.pid for worker in self._idle.queue if worker is not None and worker.alive()
            ]

    def close(self) -> None:
        """Stop every worker."""
        for _ in range(self.size):
            worker = self._idle.get()
            if worker is not None:
                worker.close()
            self._idle.put(None)


_default_pools: dict[tuple[object, ...], CompilerPool] = {}
_default_pool_lock = threading.Lock()


def default_pool(compiler: Compiler | None = None, settings: Settings | None = None) -> CompilerPool:
    """The process-wide pool of a compiler (default: the settings') under `settings` (default: those in
    effect); `settings.workers` workers."""
    settings = settings or current()
    compiler = compiler or resolve_compiler(settings=settings)
    key = (
        compiler,
        settings.workers,
        settings.compiler_timeout_seconds,
        *sorted(settings.worker_environment().items()),
    )
    with _default_pool_lock:
        if key not in _default_pools:
            pool = CompilerPool(size=settings.workers, compiler=compiler, settings=settings)
            _default_pools[key] = pool
            atexit.register(pool.close)
        return _default_pools[key]


def call_once(
    function_name: str,
    environment: dict[str, str],
    timeout: float = DEFAULT_COMPILER_TIMEOUT_SECONDS,
    compiler: Compiler | None = None,
    settings: Settings | None = None,
    **arguments: Any,
) -> tuple[Any, str]:
    """Run one call in a fresh worker of `compiler`, extra environment set; (result, its whole stderr)."""
    settings = settings or current()
    compiler = compiler or resolve_compiler(settings=settings)
    worker = Worker(
        {**compiler.worker_environment(), **settings.worker_environment(), **environment}, compiler.python
    )
    try:
        result = worker.call(function_name, arguments, timeout)
        with open(worker.stderr_path, errors="replace") as handle:
            return result, handle.read()
    finally:
        worker.close()
