"""The transition store: keys that name all that decides a result, errors kept only when they recur."""

from __future__ import annotations

import pytest

from xlabench.errors import CompilerError
from xlabench.xla.caches.transition_cache import TransitionCache
from xlabench.xla.caches.transition_store import TransitionStore, transition_key
from xlabench.xla.compilers.named_compilers import resolve_compiler


def test_the_key_leaves_out_where_the_worker_finds_its_dumps():
    arguments = {"pass_name": "cse", "disabled_passes": ["algsimp"]}
    key = transition_key("cse", "run_pass", arguments)
    assert key.startswith("cse|")
    assert transition_key("cse", "run_pass", {**arguments, "successors": ["dce"]}) == key
    assert transition_key("cse", "run_pass", {**arguments, "point_pipeline": "x"}) == key
    assert transition_key("cse", "run_pass", {**arguments, "occurrence": 2}) != key
    assert transition_key("cse", "run_pipeline_to_point", arguments) != key


def test_a_deterministic_error_is_kept_and_a_hang_is_not(tmp_path):
    store = TransitionStore(TransitionCache(str(tmp_path / "transitions.sqlite")), resolve_compiler())
    runs = []

    def failing(kind: str, deterministic: bool):
        def run():
            runs.append(kind)
            raise CompilerError(kind, "no", "cse", "f" * 64, deterministic=deterministic)

        return run

    for _ in range(2):
        with pytest.raises(CompilerError):
            store.cached_or_run("f" * 64, "timeout", failing("timeout", False))
        with pytest.raises(CompilerError, match="no"):
            store.cached_or_run("f" * 64, "crash", failing("crash", True))
    assert runs == ["timeout", "crash", "timeout"] and store.hits == 1


def test_a_record_keeps_only_what_a_transition_needs(tmp_path):
    # Not the module's name either: a record serves every module of that fingerprint, whatever its name.
    store = TransitionStore(None, resolve_compiler())
    answer = {"text": "t", "name": "n", "fingerprint": "f", "seconds": 1.0, "read_from": "pass"}
    assert store.cached_or_run("f", "k", lambda: answer) == {"text": "t", "fingerprint": "f", "seconds": 1.0}
    assert store.get("f", "k") is None and store.hits == 0  # without a cache nothing is kept
