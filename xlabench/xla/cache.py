"""Persistent caches: where they live, and the transition cache.

The transition cache maps (compiler build, module fingerprint, key) to the module after that
transition, or to the error it gave; the driver's key names the transition and digests everything
else that decides its result (see `PassDriver.cache_key`). The compiler build
(`xlabench.xla.build`) is the jaxlib release with digests of its native code and of xlabench's worker
code, so a cache kept between runs never answers for a rebuilt compiler or changed worker. The file
name carries the schema (`CACHE_SCHEMA`, which includes the fingerprint version), so records keyed by
an older fingerprint are never read. It is one SQLite database in WAL mode, so several processes
(pytest-xdist workers, parallel environments) read and write it at once; each write is one
transaction. When it grows past `$XLABENCH_CACHE_MAX_MB` (default 4096), the oldest records are dropped.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
import zlib
from typing import Any

from xlabench.xla.structure import FINGERPRINT_VERSION

# Part of the database's file name: a cache written under another schema is never read.
# Bump it (or FINGERPRINT_VERSION) whenever a key or a record would mean something else.
CACHE_SCHEMA = f"v4-f{FINGERPRINT_VERSION}"
DEFAULT_MAX_MEGABYTES = 4096
# How often (in writes) the size is checked, and what share of the records an eviction drops.
_SIZE_CHECK_EVERY = 256
_EVICTED_FRACTION = 0.25


def cache_directory() -> str:
    """$XLABENCH_CACHE_DIR, or ~/.cache/xlabench; created on first use."""
    path = os.environ.get("XLABENCH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "xlabench"
    )
    os.makedirs(path, exist_ok=True)
    return path


class TransitionCache:
    """(compiler build, fingerprint, pass) -> result record; safe across processes and threads."""

    def __init__(self, path: str | None = None, max_megabytes: float | None = None) -> None:
        self.path = path or os.path.join(cache_directory(), f"transitions-{CACHE_SCHEMA}.sqlite")
        if max_megabytes is None:
            max_megabytes = float(os.environ.get("XLABENCH_CACHE_MAX_MB", DEFAULT_MAX_MEGABYTES))
        self.max_bytes = int(max_megabytes * 1024 * 1024)
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = -1
        self._writes = 0

    def _connect(self) -> sqlite3.Connection:
        # A connection must not cross fork(): reconnect in a child process.
        if self._connection is None or self._pid != os.getpid():
            connection = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            # Switching to WAL takes an exclusive lock that SQLite's busy timeout does not wait for:
            # a process opening the cache while another one does gets "database is locked" at once.
            for attempt in range(200):
                try:
                    connection.execute("PRAGMA journal_mode=WAL")
                    break
                except sqlite3.OperationalError as error:
                    if "locked" not in str(error) or attempt == 199:
                        raise
                    time.sleep(0.05)
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(
                "CREATE TABLE IF NOT EXISTS transitions ("
                " jaxlib TEXT NOT NULL, fingerprint TEXT NOT NULL, pass TEXT NOT NULL,"
                " record BLOB NOT NULL, PRIMARY KEY (jaxlib, fingerprint, pass))"
            )
            # Eviction drops the oldest rows first: SQLite's rowid grows with every insert.
            self._connection, self._pid = connection, os.getpid()
        return self._connection

    def get(self, jaxlib_version: str, fingerprint: str, pass_name: str) -> dict[str, Any] | None:
        """The stored record, or None."""
        with self._lock:
            row = (
                self._connect()
                .execute(
                    "SELECT record FROM transitions WHERE jaxlib = ? AND fingerprint = ? AND pass = ?",
                    (jaxlib_version, fingerprint, pass_name),
                )
                .fetchone()
            )
        if row is None:
            return None
        try:
            return json.loads(zlib.decompress(row[0]))
        except (zlib.error, ValueError):
            return None  # a damaged record is recomputed

    def put(self, jaxlib_version: str, fingerprint: str, pass_name: str, record: dict[str, Any]) -> None:
        """Store a record (last writer wins; every writer computes the same record)."""
        blob = zlib.compress(json.dumps(record).encode(), 6)
        with self._lock:
            connection = self._connect()
            connection.execute(
                "INSERT OR REPLACE INTO transitions (jaxlib, fingerprint, pass, record) VALUES (?, ?, ?, ?)",
                (jaxlib_version, fingerprint, pass_name, blob),
            )
            self._writes += 1
            if self._writes % _SIZE_CHECK_EVERY == 0:
                self._evict_if_too_large(connection)

    def size_bytes(self) -> int:
        """Bytes the records occupy (pages in use, free pages not counted)."""
        with self._lock:
            return self._used_bytes(self._connect())

    def evict_if_too_large(self) -> int:
        """Drop the oldest records while the cache is over its size limit; return how many."""
        with self._lock:
            return self._evict_if_too_large(self._connect())

    @staticmethod
    def _used_bytes(connection: sqlite3.Connection) -> int:
        pages = connection.execute("PRAGMA page_count").fetchone()[0]
        free = connection.execute("PRAGMA freelist_count").fetchone()[0]
        page_size = connection.execute("PRAGMA page_size").fetchone()[0]
        return int((pages - free) * page_size)

    def _evict_if_too_large(self, connection: sqlite3.Connection) -> int:
        dropped = 0
        while self._used_bytes(connection) > self.max_bytes:
            count = connection.execute("SELECT COUNT(*) FROM transitions").fetchone()[0]
            if count == 0:
                break
            victims = max(1, int(count * _EVICTED_FRACTION))
            connection.execute(
                "DELETE FROM transitions WHERE rowid IN"
                " (SELECT rowid FROM transitions ORDER BY rowid LIMIT ?)",
                (victims,),
            )
            dropped += victims
        return dropped

    def __len__(self) -> int:
        with self._lock:
            return int(self._connect().execute("SELECT COUNT(*) FROM transitions").fetchone()[0])

    def close(self) -> None:
        """Close this process's connection."""
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None
