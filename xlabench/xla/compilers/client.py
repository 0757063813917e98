"""Calls into the compiler pool as a driver makes them: failures classified, crashes left as reproducers.

A failure XLA answered is a `CompilerError` of kind "error"; a worker that died is a "crash" and one
that hung a "timeout", each with a reproducer on disk. A crash is deterministic (worth caching) when
XLA itself aborted or faulted: it recurs on the same input, where a SIGKILL says nothing of the module.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import threading
from collections.abc import Callable
from typing import Any

from xlabench.errors import CompilerError, DriverError
from xlabench.xla.caches.transition_cache import cache_unwritable
from xlabench.xla.compilers import worker_pool
from xlabench.xla.compilers.disabled_passes import CompilerChange
from xlabench.xla.compilers.reproducers import write_reproducer
from xlabench.xla.driver.hlo_module import HloModule

# Deaths that come from XLA itself (CHECK failures, faults): they recur on the same input.
_COMPILER_FAULT_SIGNALS = frozenset(
    {signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}
)


def text_sha256(text: str) -> str:
    """Identity of raw text that has no module fingerprint yet (it may not even parse)."""
    return hashlib.sha256(text.encode()).hexdigest()


class CompilerClient:
    """Runs registered compiler functions in a pool with a driver's compiler change and timeout."""

    def __init__(
        self,
        pool: worker_pool.CompilerPool,
        change: CompilerChange,
        timeout: float,
        crash_directory: str,
        jaxlib_version: Callable[[], str],
    ) -> None:
        self.pool = pool
        self.change = change
        self.timeout = timeout
        self.crash_directory = crash_directory
        self._jaxlib_version = jaxlib_version  # for reproducers: asked only after a crash
        self._lock = threading.Lock()
        self.calls = 0  # calls answered by XLA in a worker

    def call(self, function: str, subject: str | None, module: HloModule | str, **arguments: Any) -> Any:
        """Run compiler function `function` on the module's text and `arguments`, about pass `subject`.

        Failures become CompilerError carrying the module's fingerprint (for raw text that never
        parsed, the sha256 of the text); crashes and hangs also leave a reproducer on disk.
        """
        arguments = self.change.apply(arguments)
        text = module if isinstance(module, str) else module.text
        fingerprint = text_sha256(text) if isinstance(module, str) else module.fingerprint
        with self._lock:
            self.calls += 1
        # Each full compile a call makes gets the whole timeout: a 50k-op module compiles in ~3 min, and
        # the runtime measurement compiles two of them in one call.
        timeout = self.timeout * (1 + len(arguments.get("others") or ()))
        try:
            return self.pool.call(function, timeout=timeout, text=text, **arguments)
        except worker_pool.CompilerFailure as failure:
            lasting = not isinstance(failure, worker_pool.TransientFailure)
            raise CompilerError("error", str(failure), subject, fingerprint, deterministic=lasting) from None
        except worker_pool.DriverFailure as failure:
            message = str(failure)
            reproducer = self._save_reproducer("driver", function, subject, fingerprint, text, message, "")
            raise DriverError(message, subject, fingerprint, reproducer) from None
        except worker_pool.WorkerDied as death:
            kind, message, tail = "crash", str(death), death.stderr_tail
            # A CHECK abort or a fault in XLA recurs on the same input; a SIGKILL (the out-of-memory
            # killer, a user) says nothing about the module.
            deterministic = death.exit_code is not None and -death.exit_code in _COMPILER_FAULT_SIGNALS
        except worker_pool.WorkerTimedOut as timeout:
            kind, message, tail = "timeout", str(timeout), timeout.stderr_tail
            deterministic = False
        reproducer = self._save_reproducer(kind, function, subject, fingerprint, text, message, tail)
        raise CompilerError(
            kind, _crash_summary(message, tail), subject, fingerprint, tail, reproducer, deterministic
        )

    def _save_reproducer(
        self,
        kind: str,
        function: str,
        pass_name: str | None,
        fingerprint: str,
        module_text: str,
        message: str,
        stderr_tail: str,
    ) -> str | None:
        """Write module.hlo, passes.txt and error.json for a crash or hang; the directory (None when
        it cannot be written)."""
        label = re.sub(r"[^\w.\-]+", "_", pass_name or function)
        directory = os.path.join(self.crash_directory, f"{kind}-{label}-{fingerprint[:12]}")
        details = {
            "kind": kind,
            "function": function,
            "pass": pass_name,
            "fingerprint": fingerprint,
            "message": message,
            "stderr_tail": stderr_tail,
            "jaxlib": self._jaxlib_version(),
            "replay": f"xlabench apply {os.path.join(directory, 'module.hlo')} {pass_name} -o /tmp/out.hlo"
            if pass_name and not pass_name.startswith("@")
            else None,
        }
        try:
            return write_reproducer(directory, module_text, [pass_name or function], "error.json", details)
        except OSError as error:  # the error is still raised, without its reproducer
            cache_unwritable(directory, error)
            return None


def _crash_summary(message: str, stderr_tail: str) -> str:
    """The message plus XLA's own first fatal line, when it printed one."""
    fatal = next((line for line in stderr_tail.splitlines() if re.match(r"^[FE]\d{4} ", line)), None)
    return f"{message}: {fatal.split('] ', 1)[-1]}" if fatal else message
