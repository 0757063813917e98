"""Persistent caches: where they live, and the transition cache.

The transition cache maps (compiler build, module fingerprint, key) to the module after that
transition, or to the error it gave; the driver's key names the transition and digests everything
else that decides its result (see `PassDriver.cache_key`). The compiler build
(`xlabench.xla.compilers.build_identity`) is the jaxlib release with digests of its native code and of
xlabench's worker code, so a cache kept between runs never answers for a rebuilt compiler or changed worker.
The file name carries the schema (`CACHE_SCHEMA`, which includes the fingerprint version), so records keyed by
an older fingerprint are never read. It is one SQLite database in WAL mode, so several processes
(pytest-xdist workers, parallel environments) read and write it at once; each write is one
transaction. When it grows past `$XLABENCH_CACHE_MAX_MB` (default 4096), the oldest records are dropped.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import sys
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

from xlabench.settings import Settings, current
from xlabench.xla.shared.cache_directory import cache_directory
from xlabench.xla.shared.module_structure import FINGERPRINT_VERSION

# Part of the database's file name: a cache written under another schema is never read.
# Bump it (or FINGERPRINT_VERSION) whenever a key or a record would mean something else.
CACHE_SCHEMA = f"v4-f{FINGERPRINT_VERSION}"
# How often (in writes) the size is checked, and what share of the records an eviction drops.
_SIZE_CHECK_EVERY = 256
_EVICTED_FRACTION = 0.25
_Result = TypeVar("_Result")


def crash_directory(settings: Settings | None = None) -> str:
    """Where crash and hang reproducers go: $XLABENCH_CRASH_DIR, or `crashes/` in the cache directory
    (default: the settings in effect)."""
    return (settings or current()).crash_directory


_warned: set[str] = set()


def warn_once(key: str, message: str) -> None:
    """Print `xlabench: warning: MESSAGE` on stderr, once per process for each `key`."""
    if key not in _warned:
        _warned.add(key)
        print(f"xlabench: warning: {message}", file=sys.stderr, flush=True)


def cache_unwritable(path: str, error: Exception) -> None:
    """Say once that a cache file cannot be written (the command goes on without keeping it)."""
    reason = (error.strerror if isinstance(error, OSError) else None) or str(error)
    warn_once(
        "unwritable cache",
        f"the cache directory {cache_directory()} cannot be written ({reason}: {path}): running "
        "without keeping results there; every figure is computed as on a fresh cache",
    )


def _damaged(error: sqlite3.DatabaseError) -> bool:
    """A file SQLite cannot read as a database (garbage, truncated), not a lock or a permission."""
    return getattr(error, "sqlite_errorcode", None) in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def _set_aside(path: str, inode: int | None) -> str | None:
    """Rename the damaged database this process opened (and its WAL files) out of the way; the new
    name, or None when another process already did and started a new one at `path`."""
    try:
        if os.stat(path).st_ino != inode:
            return None
    except FileNotFoundError:
        return None
    aside = f"{path}.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(FileNotFoundError):
            os.replace(path + suffix, aside + suffix)
    return aside


class TransitionCache:
    """(compiler build, fingerprint, pass) -> result record; safe across processes and threads.

    A database SQLite cannot read (truncated, overwritten) is set aside under a timestamped name,
    with one warning, and a new one started; one that cannot be opened or written (a read-only
    directory, a full disk) turns the cache off for this process, with one warning. Neither changes
    a result: a record not found is computed.
    """

    def __init__(
        self, path: str | None = None, max_megabytes: float | None = None, settings: Settings | None = None
    ) -> None:
        settings = settings or current()
        self.path = path or os.path.join(cache_directory(settings), f"transitions-{CACHE_SCHEMA}.sqlite")
        if max_megabytes is None:
            max_megabytes = settings.cache_max_megabytes
        self.max_bytes = int(max_megabytes * 1024 * 1024)
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None
        self._pid = -1
        self._writes = 0
        self._off = False  # the database cannot be used here: every lookup misses, nothing is kept
        self._inode: int | None = None  # of the file this process opened (set aside only that one)

    def _guarded(self, operation: Callable[[sqlite3.Connection], _Result], default: _Result) -> _Result:
        """`operation` on the connection; a damaged file is set aside once, an unusable one turns it off."""
        for attempt in range(2):
            if self._off:
                return default
            try:
                return operation(self._connect())
            except sqlite3.DatabaseError as error:
                self._drop_connection()
                if attempt == 0 and _damaged(error):
                    aside = _set_aside(self.path, self._inode)
                    if aside is not None:
                        warn_once(
                            f"damaged {self.path}",
                            f"the transition cache {self.path} cannot be read ({error}): set aside as "
                            f"{aside}, starting a new one",
                        )
                elif "locked" in str(error):
                    raise  # another process holds it past the busy timeout: not the file's fault
                else:  # cannot be opened or written: a read-only directory, a full disk
                    self._off = True
                    cache_unwritable(self.path, error)
            except OSError as error:  # the directory itself cannot be made or entered
                self._drop_connection()
                self._off = True
                cache_unwritable(self.path, error)
        return default

    def _drop_connection(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(sqlite3.Error):
                self._connection.close()
        self._connection = None

    def _connect(self) -> sqlite3.Connection:
        # A connection must not cross fork(): reconnect in a child process.
        if self._connection is None or self._pid != os.getpid():
            connection = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            self._inode = None
            with contextlib.suppress(OSError):
                self._inode = os.stat(self.path).st_ino
            try:
                self._set_up(connection)
            except BaseException:
                connection.close()
                raise
            self._connection, self._pid = connection, os.getpid()
        return self._connection

    @staticmethod
    def _set_up(connection: sqlite3.Connection) -> None:
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
        # Eviction drops the oldest rows first: SQLite's rowid grows with every insert.
        connection.execute(
            "CREATE TABLE IF NOT EXISTS transitions ("
            " jaxlib TEXT NOT NULL, fingerprint TEXT NOT NULL, pass TEXT NOT NULL,"
            " record BLOB NOT NULL, PRIMARY KEY (jaxlib, fingerprint, pass))"
        )

    def get(self, jaxlib_version: str, fingerprint: str, pass_name: str) -> dict[str, Any] | None:
        """The stored record, or None."""
        with self._lock:
            row = self._guarded(
                lambda connection: connection.execute(
                    "SELECT record FROM transitions WHERE jaxlib = ? AND fingerprint = ? AND pass = ?",
                    (jaxlib_version, fingerprint, pass_name),
                ).fetchone(),
                None,
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

        def insert(connection: sqlite3.Connection) -> None:
            connection.execute(
                "INSERT OR REPLACE INTO transitions (jaxlib, fingerprint, pass, record) VALUES (?, ?, ?, ?)",
                (jaxlib_version, fingerprint, pass_name, blob),
            )
            self._writes += 1
            if self._writes % _SIZE_CHECK_EVERY == 0:
                self._evict_if_too_large(connection)

        with self._lock:
            self._guarded(insert, None)

    def size_bytes(self) -> int:
        """Bytes the records occupy (pages in use, free pages not counted)."""
        with self._lock:
            return self._guarded(self._used_bytes, 0)

    def evict_if_too_large(self) -> int:
        """Drop the oldest records while the cache is over its size limit; return how many."""
        with self._lock:
            return self._guarded(self._evict_if_too_large, 0)

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
            return int(
                self._guarded(lambda c: c.execute("SELECT COUNT(*) FROM transitions").fetchone()[0], 0)
            )

    def close(self) -> None:
        """Close this process's connection."""
        with self._lock:
            if self._connection is not None and self._pid == os.getpid():
                self._connection.close()
            self._connection = None
