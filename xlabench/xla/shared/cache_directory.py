"""Where xlabench keeps what it caches, for both sides of the compiler boundary.

A compiler worker reads the same variable as its caller (the pool passes the caller's environment on),
so transitions, payloads and executables land in one directory.
"""

from __future__ import annotations

import contextlib
import os


def cache_directory() -> str:
    """$XLABENCH_CACHE_DIR, or ~/.cache/xlabench; created on first use (when it can be: each cache
    that cannot write there runs without, and says so once)."""
    path = os.environ.get("XLABENCH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "xlabench"
    )
    with contextlib.suppress(OSError):
        os.makedirs(path, exist_ok=True)
    return path
