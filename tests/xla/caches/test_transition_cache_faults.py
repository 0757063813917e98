"""Faults a CI machine's cache sees -- a damaged database (a killed job), a directory that cannot be
written (a read-only mount, a full disk) -- cost the cache, never a number, and say so in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from xlabench.xla.caches.transition_cache import CACHE_SCHEMA, TransitionCache, _set_aside

GRAPH = "opt-barrier"  # a synthetic case: seconds to compile


def _stats(cache_directory: Path) -> tuple[dict, list[str], int]:
    """`xlabench stats GRAPH --json` with its own cache directory: the figures, stderr's lines, the exit."""
    environment = {**os.environ, "XLABENCH_CACHE_DIR": str(cache_directory)}
    result = subprocess.run(
        [sys.executable, "-m", "xlabench.cli", "stats", GRAPH, "--json"],
        capture_output=True, text=True, timeout=600, env=environment,
    )  # fmt: skip
    figures = json.loads(result.stdout) if result.returncode == 0 else {}
    figures.pop("full_compile_seconds", None)  # a wall time: the one figure that is not a count
    return figures, result.stderr.strip().splitlines(), result.returncode


def _damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if how == "truncated" else os.urandom(len(data)))
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def fresh_figures(tmp_path_factory) -> dict:
    figures, errors, code = _stats(tmp_path_factory.mktemp("fresh-cache"))
    assert code == 0 and errors == [], errors
    return figures


@pytest.mark.parametrize("how", [pytest.param("truncated", marks=pytest.mark.slow), "garbage"])
def test_a_damaged_transition_cache_is_set_aside_and_the_numbers_stay(tmp_path, how):
    fresh_figures, errors, code = _stats(tmp_path)  # from an empty cache, which it fills
    assert code == 0 and errors == [], errors
    database = tmp_path / f"transitions-{CACHE_SCHEMA}.sqlite"
    _damage(database, how)
    figures, errors, code = _stats(tmp_path)
    assert code == 0 and figures == fresh_figures
    assert len(errors) == 1 and "set aside as" in errors[0] and "starting a new one" in errors[0], errors
    assert len(list(tmp_path.glob(f"{database.name}.damaged-*"))) == 1
    # The new database serves the next run, silently.
    assert _stats(tmp_path)[:2] == (fresh_figures, [])


@pytest.mark.slow
def test_a_cache_directory_that_cannot_be_made_runs_uncached_with_one_warning(tmp_path, fresh_figures):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    figures, errors, code = _stats(blocker / "cache")
    assert code == 0 and figures == fresh_figures
    assert len(errors) == 1 and "cannot be written" in errors[0] and "running without" in errors[0], errors


def test_a_database_that_cannot_be_opened_turns_the_cache_off(tmp_path, capsys):
    # A directory where the database should be: SQLite cannot open it (as a read-only location does).
    path = tmp_path / "transitions.sqlite"
    path.mkdir()
    cache = TransitionCache(str(path))
    cache.put("v", "f", "p", {"text": "x"})
    assert cache.get("v", "f", "p") is None and len(cache) == 0
    warnings = capsys.readouterr().err.strip().splitlines()
    assert len(warnings) == 1 and "cannot be written" in warnings[0]


def test_a_damaged_database_another_process_set_aside_is_not_set_aside_again(tmp_path):
    # Process A met the damage first and started a new database at the path; process B, which opened the
    # damaged file, meets it later: the file at the path is not the one B opened, so B leaves it.
    path = tmp_path / "transitions.sqlite"
    path.write_bytes(b"damaged")
    opened_by_b = path.stat().st_ino
    assert _set_aside(str(path), opened_by_b) is not None  # A's move (A had opened it too)
    TransitionCache(str(path)).put("v", "f", "p", {"text": "new"})  # A's new database
    assert _set_aside(str(path), opened_by_b) is None
    assert TransitionCache(str(path)).get("v", "f", "p") == {"text": "new"}
    assert len(list(tmp_path.glob("transitions.sqlite.damaged-*"))) == 1
