"""What a compiler call can fail with, raised inside a worker and raised again in its caller.

The worker sends the kind of a failure with its message (`xlabench.xla.worker.__main__`); the caller's
handle (`xlabench.xla.compilers.worker_handle`) raises the same class, so both sides share these.
"""

from __future__ import annotations


class CompilerFailure(Exception):
    """XLA answered with an error status (raised in the worker, re-raised in the caller)."""


class TransientFailure(CompilerFailure):
    """An answer that says nothing lasting about the module -- a constant payload the store does not
    hold (removed as damaged, or text made with another cache directory) -- so it is never cached."""


class DriverFailure(Exception):
    """xlabench could not read what XLA did (a dump missing or unreadable, a stop that never fired):
    the driver's defect, never an answer about the module (raised in the worker, re-raised in the caller)."""
