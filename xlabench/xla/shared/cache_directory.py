"""Where xlabench keeps what it caches, for both sides of the compiler boundary.

The caller's settings name it (`xlabench.settings`); a compiler worker is started with the same directory
(`Settings.worker_environment`), so transitions, payloads and executables land in one place.
"""

from __future__ import annotations

import contextlib
import os

from xlabench.settings import Settings, current


def cache_directory(settings: Settings | None = None) -> str:
    """The settings' cache directory (default: the settings in effect); created on first use (when it can
    be: each cache that cannot write there runs without, and says so once)."""
    path = (settings or current()).cache_directory
    with contextlib.suppress(OSError):
        os.makedirs(path, exist_ok=True)
    return path
