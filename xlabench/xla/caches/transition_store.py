"""The transition store: what a compiler call made of a module, under a key naming all that decides it.

Records live in the transition cache (`xlabench.xla.caches.transition_cache`) under the compiler build, the
module's fingerprint (a loaded text's sha256) and a key: a readable name plus a digest of the compiler
function, its arguments and the canonical form's version. A deterministic error is kept like a
result, so asking again costs no compile; a hang or a kill (which may be the machine's load) is not.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from typing import Any

from xlabench.errors import CompilerError
from xlabench.xla.caches.transition_cache import TransitionCache
from xlabench.xla.compilers.named_compilers import Compiler, compiler_build
from xlabench.xla.shared.module_structure import NORMALIZATION_VERSION

# Compiler-call arguments that only tell the worker which dumps to write (`pass_runs.run_pass`,
# `pass_runs.run_pipeline_to_point`): the result is the same either way, so cache keys leave them out.
_WHERE_DUMPED = frozenset({"successors", "point_pipeline"})
# What a transition record keeps of a compiler function's answer: nothing that depends on the module's
# name (the text names it INTERNAL_MODULE_NAME; the caller names the result after its input).
_RECORD_FIELDS = ("text", "fingerprint", "seconds", "features", "changes")


def transition_key(key: str, function: str, arguments: dict[str, Any]) -> str:
    """The transition-cache key: `key` (readable) plus a digest of all that decides the result.

    That is the compiler function, its arguments (the disabled-pass list -- derived from the
    catalogue's tables --, the instance of the pass, the counting point) and the version of the
    canonical form; the jaxlib version and the module's fingerprint are keys of their own.
    """
    # Where the worker finds its dump does not change the result: not in the key.
    decisive = {name: value for name, value in arguments.items() if name not in _WHERE_DUMPED}
    material = json.dumps(
        {"function": function, "arguments": decisive, "normalization": NORMALIZATION_VERSION},
        sort_keys=True,
    )
    return f"{key}|{hashlib.sha256(material.encode()).hexdigest()[:20]}"


class TransitionStore:
    """Cached records of a compiler's transitions (none kept when `cache` is None); counts the hits."""

    def __init__(self, cache: TransitionCache | None, compiler: Compiler) -> None:
        self.cache = cache
        self.compiler = compiler
        self._lock = threading.Lock()
        self.hits = 0  # answers served from the cache

    def get(self, fingerprint: str, key: str) -> dict[str, Any] | None:
        """The record kept for the module and key, or None (also without a cache)."""
        if self.cache is None:
            return None
        record = self.cache.get(compiler_build(self.compiler), fingerprint, key)
        if record is not None:
            with self._lock:
                self.hits += 1
        return record

    def put(self, fingerprint: str, key: str, record: dict[str, Any]) -> None:
        """Keep a record for the module and key (nothing without a cache)."""
        if self.cache is not None:
            self.cache.put(compiler_build(self.compiler), fingerprint, key, record)

    def cached_or_run(
        self,
        fingerprint: str,
        key: str,
        run: Callable[[], dict[str, Any]],
        usable: Callable[[dict[str, Any]], bool] = lambda record: True,
    ) -> dict[str, Any]:
        """The record kept for the module and key, else `run()`'s (kept); a kept error is raised again.

        A kept record `usable` refuses (one naming payloads no longer stored) is made again.
        """
        record = self.get(fingerprint, key)
        if record is not None and ("error" in record or usable(record)):
            if "error" in record:
                raise CompilerError.from_dict(record["error"])
            return record
        try:
            record = run()
        except CompilerError as error:
            if error.deterministic:  # hangs and kills may be load
                self.put(fingerprint, key, {"error": error.to_dict()})
            raise
        record = {field: record[field] for field in _RECORD_FIELDS if field in record}
        self.put(fingerprint, key, record)
        return record
