"""The transition cache: persistent, and safe with several writer processes at once."""

from __future__ import annotations

import multiprocessing
import sqlite3

from xlabench.xla.caches.transition_cache import TransitionCache


def _write_many(path: str, writer: int, count: int) -> None:
    cache = TransitionCache(path)
    for index in range(count):
        cache.put("0.0", f"fingerprint-{index}", f"pass-{writer}", {"text": f"{writer}:{index}"})
        assert cache.get("0.0", f"fingerprint-{index}", "pass-0") in (None, {"text": f"0:{index}"})


def test_records_round_trip_and_persist(tmp_path):
    path = str(tmp_path / "cache.sqlite")
    TransitionCache(path).put("0.10.2", "abc", "cse", {"text": "HloModule m", "name": "m"})
    assert TransitionCache(path).get("0.10.2", "abc", "cse") == {"text": "HloModule m", "name": "m"}
    assert TransitionCache(path).get("0.10.3", "abc", "cse") is None  # keyed by jaxlib version


def test_concurrent_writer_processes_lose_nothing(tmp_path):
    path = str(tmp_path / "cache.sqlite")
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_write_many, args=(path, writer, 60)) for writer in range(4)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=120)
        assert process.exitcode == 0
    assert len(TransitionCache(path)) == 4 * 60


def test_a_damaged_record_reads_as_missing(tmp_path):
    path = str(tmp_path / "cache.sqlite")
    cache = TransitionCache(path)
    cache.put("v", "f", "p", {"text": "x"})
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE transitions SET record = x'00ff'")
    assert TransitionCache(path).get("v", "f", "p") is None


def test_a_cache_over_its_size_limit_drops_its_oldest_records(tmp_path):
    cache = TransitionCache(str(tmp_path / "cache.sqlite"), max_megabytes=0.25)
    text = "".join(f"%instruction.{index} = f32[] constant({index})\n" for index in range(4000))
    for index in range(60):  # about 20 KB each once compressed: several times the limit in all
        cache.put("v", f"fingerprint-{index}", "pass", {"text": f"{index}\n{text}{index}"})
    cache.evict_if_too_large()
    assert cache.size_bytes() <= cache.max_bytes
    assert 0 < len(cache) < 60
    assert cache.get("v", "fingerprint-59", "pass") is not None  # the newest record stays
    assert cache.get("v", "fingerprint-0", "pass") is None  # the oldest went first
