"""The transition cache never answers for another module: fingerprints see computation sharing.

Regression for the collision where `flatten-call-graph` (which clones every computation with several
call sites) kept its input's fingerprint, so the cache answered `flatten-call-graph` -> `call-inliner`
with call-inliner's result on the *unflattened* module.
"""

from __future__ import annotations

import json
import sqlite3
import zlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xlabench.xla import PassDriver
from xlabench.xla.caches.transition_cache import TransitionCache


def test_flatten_call_graph_then_call_inliner_is_the_same_with_cache_on_and_off(
    fresh_driver, uncached_driver, shared_calls_module
):
    module = shared_calls_module
    # Fill the cache with call-inliner on the unflattened module: the answer a collision would serve.
    direct = fresh_driver.apply_pass(module, "call-inliner")
    assert fresh_driver.features(direct).histogram.get("call", 0) > 0  # several call sites stay calls
    flattened = fresh_driver.apply_pass(module, "flatten-call-graph")
    assert flattened.fingerprint != module.fingerprint
    assert fresh_driver.features(flattened).computations > fresh_driver.features(module).computations
    cached = fresh_driver.apply_pass(flattened, "call-inliner")
    fresh = uncached_driver.apply_pass(
        uncached_driver.apply_pass(module, "flatten-call-graph"), "call-inliner"
    )
    assert cached.fingerprint == fresh.fingerprint
    assert cached.text == fresh.text
    assert fresh_driver.features(cached).histogram.get("call", 0) == 0


SEQUENCE_PASSES = [
    "flatten-call-graph",
    "call-inliner",
    "algsimp",
    "cse",
    "dce",
    "tuple-simplifier",
    "reshape-mover",
    "constant_folding",
    "batchnorm_expander",
]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sequence=st.lists(st.sampled_from(SEQUENCE_PASSES), min_size=1, max_size=6))
def test_cache_on_and_cache_off_agree_on_random_sequences(
    sequence, fresh_driver, uncached_driver, shared_calls_module
):
    # fresh_driver's cache is shared by every example, so later sequences meet cached states.
    with_cache = fresh_driver.apply_passes(shared_calls_module, sequence)
    without_cache = uncached_driver.apply_passes(shared_calls_module, sequence)
    assert [step.module.fingerprint for step in with_cache] == [
        step.module.fingerprint for step in without_cache
    ]
    assert with_cache[-1].module.text == without_cache[-1].module.text


def test_a_cache_written_under_an_older_schema_is_never_read(tmp_path, monkeypatch, shared_calls_module):
    monkeypatch.setenv("XLABENCH_CACHE_DIR", str(tmp_path))
    driver = PassDriver(crash_directory=str(tmp_path / "crashes"))
    assert driver.cache.path != str(tmp_path / "transitions.sqlite")
    # A record under the old file name and layout, keyed by this very module, holding a wrong answer.
    old = sqlite3.connect(str(tmp_path / "transitions.sqlite"))
    old.execute(
        "CREATE TABLE transitions (jaxlib TEXT, fingerprint TEXT, pass TEXT, record BLOB,"
        " PRIMARY KEY (jaxlib, fingerprint, pass))"
    )
    wrong = {"text": "HloModule wrong", "name": "wrong", "fingerprint": "0" * 64}
    old.execute(
        "INSERT INTO transitions VALUES (?, ?, ?, ?)",
        (
            driver.jaxlib_version,
            shared_calls_module.fingerprint,
            "cse",
            zlib.compress(json.dumps(wrong).encode()),
        ),
    )
    old.commit()
    old.close()
    assert driver.apply_pass(shared_calls_module, "cse").fingerprint != "0" * 64
    assert len(TransitionCache(driver.cache.path)) == 1
