"""The executable cache: programs XLA compiled, kept on disk so that each is compiled once per machine.

Worker side (it reaches jaxlib through `xlabench.xla.worker.adapter`). Timing a sequence against XLA's default
compiles both programs in full (code generation included): seconds each for the suite's larger
graphs, and the same default program is compiled again by every policy, test and command that judges
that graph. The key digests everything that decides the code: the jaxlib version, this machine's CPU
(XLA generates code for the host it runs on), the module text and the compile options. Files are
written to a temporary name and renamed, so a reader never sees half a file; an unreadable file is
dropped and the program compiled. Past `$XLABENCH_EXECUTABLE_CACHE_MAX_MB` (default 2048) the least
recently used files go. `XLABENCH_EXECUTABLE_CACHE=0` turns the cache off.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from typing import Any

from xlabench.settings import current, worker_start
from xlabench.xla.shared.cache_directory import cache_directory
from xlabench.xla.worker import adapter

_SUFFIX = ".executable"
# A file is this header, the sha256 of the payload, then the payload: a truncated or foreign file is
# recognised before XLA is handed its bytes.
_MAGIC = b"xlabench-executable-1\n"
_STALE_TEMPORARY_SECONDS = 3600  # a temporary file this old was left by a worker killed mid-write


@functools.cache
def _machine() -> str:
    """What code generation depends on here: the architecture, the CPU's model and flags, the usable cores."""
    details = [platform.machine()]
    try:
        with open("/proc/cpuinfo") as handle:
            details += sorted(
                {line.strip() for line in handle if line.startswith(("model name", "flags", "Features"))}
            )
    except OSError:
        details.append(platform.processor())
    try:
        details.append(f"cores {len(os.sched_getaffinity(0))}")
    except (AttributeError, OSError):
        details.append(f"cores {os.cpu_count()}")
    return "\n".join(details)


def _build() -> str:
    """The compiler build this worker runs (`xlabench.xla.compilers.build_identity`), given by the pool; else
    the release."""
    return worker_start().compiler_build or adapter.jaxlib_version()


def _directory() -> str:
    path = os.path.join(cache_directory(), f"executables-jaxlib-{_build()}")
    os.makedirs(path, exist_ok=True)
    return path


def enabled() -> bool:
    """Whether the cache is on (`XLABENCH_EXECUTABLE_CACHE=0` turns it off)."""
    return current().executable_cache


def executable_key(text: str, overrides: dict[str, Any]) -> str:
    """The file name's digest: jaxlib, machine, module text and compile options."""
    digest = hashlib.sha256()
    for part in (_build(), _machine(), json.dumps(overrides, sort_keys=True), text):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def compiled(text: str, overrides: dict[str, Any], compile_text: Callable[[], Any]) -> tuple[Any, bool]:
    """The executable of `text` under `overrides`: from the cache, else `compile_text()` (then stored).

    Returns (executable, whether it came from the cache). A loaded program is the compiled one's
    machine code (its outputs and optimized module are the same: tests/xla/worker/test_executable_cache.py);
    loading a fresh compile back only to time it would cost a cold run a deserialization a program.
    Storing is best effort: a full disk or a read-only folder costs the cache, not the compile.
    """
    if not enabled():
        return compile_text(), False
    try:
        path = os.path.join(_directory(), executable_key(text, overrides) + _SUFFIX)
    except OSError:  # the cache directory cannot be made (the caller has said so): compile, keep nothing
        return compile_text(), False
    payload = _read(path)
    if payload is not None:
        try:
            executable = adapter.deserialize_executable(payload, overrides)
            with contextlib.suppress(OSError):
                os.utime(path)  # recently used: kept longest
            return executable, True
        except Exception:  # bytes this jaxlib does not take (or cannot load at all): compile again
            _remove(path)
    executable = compile_text()
    try:
        payload = adapter.serialize_executable(executable)
    except Exception:  # a program (or a jaxlib) that cannot go through bytes: it is simply not kept
        return executable, False
    with contextlib.suppress(OSError):
        _write(path, payload)
        _evict(os.path.dirname(path))
    return executable, False


def _read(path: str) -> bytes | None:
    """The payload stored at `path`, or None (missing, truncated or foreign: then removed)."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    header = len(_MAGIC) + 32
    if data[: len(_MAGIC)] != _MAGIC or hashlib.sha256(data[header:]).digest() != data[len(_MAGIC) : header]:
        _remove(path)
        return None
    return data[header:]


def _write(path: str, payload: bytes) -> None:
    """Write header, digest and payload to a temporary file, then rename it into place."""
    descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            # No fsync: a file cut short by a crash fails its digest and is compiled again.
            handle.write(_MAGIC + hashlib.sha256(payload).digest() + payload)
        os.replace(temporary, path)
    finally:
        _remove(temporary)


def _remove(path: str) -> None:
    """Remove a file; one already gone is fine (another process may have dropped it)."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)


def _evict(directory: str) -> None:
    """Drop the least recently used files until the folder fits its limit, and stale temporary files."""
    limit = current().executable_cache_max_megabytes * 1024 * 1024
    entries = []
    now = time.time()
    for entry in os.scandir(directory):
        try:
            status = entry.stat()
        except FileNotFoundError:
            continue
        if entry.name.endswith(".tmp") and now - status.st_mtime > _STALE_TEMPORARY_SECONDS:
            _remove(entry.path)
        elif entry.name.endswith(_SUFFIX):
            entries.append((status.st_mtime, status.st_size, entry.path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= limit:
            break
        _remove(path)
        total -= size
