"""apply_pass and the default pipeline, run by the real XLA CPU compiler in jaxlib."""

from __future__ import annotations

import json
import os
import signal
import threading

import numpy as np
import pytest

from xlabench.errors import CompilerError, UnknownPassError, UserInputError
from xlabench.graphs import resolve_graphs
from xlabench.xla import HloModule, PassDriver
from xlabench.xla.caches.transition_cache import TransitionCache
from xlabench.xla.compilers.pass_catalogue import COUNTING_POINT_PASS
from xlabench.xla.compilers.worker_pool import CompilerPool


def test_algsimp_simplifies_what_xla_simplifies(fresh_driver, redundant_module):
    assert redundant_module.op_count == 9
    before = fresh_driver.features(redundant_module).histogram
    assert before["log"] == 1 and before["exp"] == 1 and before["negate"] == 2
    after = fresh_driver.apply_pass(redundant_module, "algsimp")
    histogram = fresh_driver.features(after).histogram
    # log(exp(y)) -> y and negate(negate(y)) -> y; the duplicated multiply is left for CSE.
    assert "log" not in histogram and "exp" not in histogram and "negate" not in histogram
    assert histogram["multiply"] == 2
    assert fresh_driver.features(after).op_count == 5


def test_cse_merges_the_duplicate_and_order_matters(fresh_driver, redundant_module):
    cse_first = fresh_driver.apply_pass(redundant_module, "cse")
    assert fresh_driver.features(cse_first).histogram["multiply"] == 1
    both = fresh_driver.apply_pass(fresh_driver.apply_pass(redundant_module, "algsimp"), "cse")
    assert fresh_driver.features(both).op_count == 4
    assert fresh_driver.features(cse_first).op_count > fresh_driver.features(both).op_count


def test_pass_output_is_accepted_again_in_any_order(fresh_driver, mixed_module):
    actions = fresh_driver.catalogue.action_passes()
    module = mixed_module
    for pass_name in [*actions, *reversed(actions), "algsimp", "algsimp"]:
        module = fresh_driver.apply_pass(module, pass_name)
        reloaded = fresh_driver.load(module.text)
        assert reloaded.fingerprint == module.fingerprint
    assert module.text.startswith("HloModule")


def test_fixed_point_variant_runs_the_pass_until_it_changes_nothing(fresh_driver):
    graph = resolve_graphs("mlp_mixer-infer-l2-d64-p4-i16-b2-bf16")[0]
    module = fresh_driver.load(graph.hlo_text(), graph.name)
    for pass_name in ("dot_decomposer", "float-normalization-bf16", "algsimp"):
        module = fresh_driver.apply_pass(module, pass_name)
    fixed, runs = fresh_driver.apply_to_fixed_point(module, "reshape-mover")
    # This graph needs reshape-mover more than once (it moves one layer of reshapes a run).
    once = fresh_driver.apply_pass(module, "reshape-mover")
    assert runs >= 3 and fresh_driver.apply_pass(once, "reshape-mover").fingerprint != once.fingerprint
    # The run is read from the dump "before what follows it" (one file a round of XLA's loop); the
    # dumps of the pass itself give the very same module.
    pipeline = fresh_driver.catalogue.passes["reshape-mover"].ancestors
    disabled = fresh_driver.catalogue.disabled_for_single_pass("reshape-mover")
    arguments = {"pass_name": "reshape-mover", "disabled_passes": disabled, "pipeline": pipeline[-1]}
    successors = fresh_driver.catalogue.successors("reshape-mover", pipeline, disabled)
    itself, narrowed = (
        fresh_driver.call_compiler("run_pass", "reshape-mover", module, **arguments, **extra)
        for extra in ({}, {"successors": successors})
    )
    assert itself["read_from"] == "pass" and narrowed["read_from"] == "successors"
    assert itself["fingerprint"] == narrowed["fingerprint"] == once.fingerprint
    # Where the module was read from is not part of the transition-cache key.
    key = PassDriver.cache_key("reshape-mover", "run_pass", arguments)
    assert PassDriver.cache_key("reshape-mover", "run_pass", {**arguments, "successors": ["x"]}) == key
    assert fresh_driver.apply_pass(fixed, "reshape-mover").fingerprint == fixed.fingerprint
    assert fresh_driver.apply_pass(module, "reshape-mover:fixed-point").fingerprint == fixed.fingerprint
    with pytest.raises(UnknownPassError, match="cse does not first run in a fixed-point pipeline"):
        fresh_driver.apply_pass(module, "cse:fixed-point")


def test_same_module_and_sequence_give_the_same_fingerprint(uncached_driver, mixed_module):
    sequence = ["call-inliner", "algsimp", "while-loop-invariant-code-motion", "cse", "simplify-while-loops"]
    runs = []
    for _ in range(2):
        steps = uncached_driver.apply_passes(mixed_module, sequence)
        assert all(step.error is None for step in steps)
        runs.append([step.module.fingerprint for step in steps])
    assert runs[0] == runs[1]


def test_default_pipeline_and_required_passes_count_at_the_same_point(fresh_driver, mixed_module):
    default = fresh_driver.run_default_pipeline(mixed_module)
    required = fresh_driver.run_required_passes(mixed_module)
    assert fresh_driver.features(default).op_count < fresh_driver.features(required).op_count
    # Required passes are idempotent at the counting point: running them again changes nothing.
    assert fresh_driver.run_required_passes(required).fingerprint == required.fingerprint
    # Neither has been through layout assignment: no layout-changing copies were inserted.
    assert "copy" not in fresh_driver.features(default).histogram
    # Read from the one dump "before layout-assignment", or from the last of its pipeline's dumps.
    every_sibling = fresh_driver.call_compiler(
        "run_pipeline_to_point",
        None,
        mixed_module,
        disabled_passes=[],
        point_pass=COUNTING_POINT_PASS,
        sibling_passes=fresh_driver.catalogue.counting_point_siblings(),
    )
    assert every_sibling["fingerprint"] == default.fingerprint


def test_required_passes_do_not_rerun_an_orderable_pass_the_sequence_applied(
    fresh_driver, bf16_branches_module
):
    default = fresh_driver.run_default_pipeline(bf16_branches_module)
    own_count = fresh_driver.features(default).op_count
    # Normalizing bf16 again after algsimp removed converts is not idempotent: two converts come back.
    rerun = fresh_driver.run_required_passes(default)
    assert fresh_driver.features(rerun).histogram["convert"] == (
        fresh_driver.features(default).histogram["convert"] + 2
    )
    # A sequence that applied it (as XLA's pipeline did, once) is not charged for a second run.
    assert fresh_driver.fair_op_count(default, ["float-normalization-bf16"]) == own_count
    assert fresh_driver.fair_op_count(default) == own_count + 2


def test_a_later_instance_of_a_pass_runs_with_its_own_options(fresh_driver, grouped_bf16_conv_module):
    module = grouped_bf16_conv_module
    path = fresh_driver.catalogue.passes["convolution-group-converter"].ancestors
    # XLA adds convolution-group-converter twice: first for batch groups only, then for feature
    # groups of types other than f16/f32. The action (first instance) leaves this convolution alone.
    first = fresh_driver.apply_pass(module, "convolution-group-converter")
    assert first.fingerprint == module.fingerprint
    second = fresh_driver.apply_pass(module, "convolution-group-converter", path, occurrence=2)
    assert "feature_group_count=2" in module.text and "feature_group_count" not in second.text
    with pytest.raises(CompilerError, match="did not run in pipeline"):
        fresh_driver.apply_pass(module, "convolution-group-converter", path, occurrence=3)


def test_unknown_pass_and_pipeline_names_are_rejected(fresh_driver, redundant_module):
    with pytest.raises(UnknownPassError, match="did you mean algsimp"):
        fresh_driver.apply_pass(redundant_module, "algsimpp")
    with pytest.raises(UnknownPassError, match="pipeline"):
        fresh_driver.apply_pass(redundant_module, "simplification")
    with pytest.raises(UnknownPassError, match="copy-insertion"):
        fresh_driver.apply_pass(redundant_module, "copy-insertion")


def test_a_required_pass_can_be_applied_alone(fresh_driver, mixed_module):
    # Required passes are applicable too: the CPU backend has no bf16 convolution, so
    # float-normalization-bf16 wraps it in f32 with one more convert.
    after = fresh_driver.apply_pass(mixed_module, "float-normalization-bf16")
    before_converts = fresh_driver.features(mixed_module).histogram["convert"]
    assert fresh_driver.features(after).histogram["convert"] == before_converts + 1
    assert fresh_driver.load(after.text).fingerprint == after.fingerprint


def test_malformed_text_raises_user_input_error_naming_the_line(tmp_path):
    # Empty files and bad paths: tests/cli/test_compilers.py, as a user meets them.
    path = tmp_path / "bad.hlo"
    path.write_text("HloModule m\n\nENTRY e {\n  ROOT x = f32[] nonsense()\n}\n")
    with pytest.raises(UserInputError, match="line 4"):
        HloModule.from_file(path)


def test_a_compiler_crash_is_isolated_reported_and_reproducible(tmp_path, mixed_module):
    driver = PassDriver(pool=CompilerPool(1), use_cache=False, crash_directory=str(tmp_path))
    # Compiling without gather_simplifier makes XLA's CPU emitter CHECK-fail on the gather: a real abort.
    with pytest.raises(CompilerError) as raised:
        driver.call_compiler(
            "compile_and_run",
            "gather_simplifier",
            mixed_module,
            disabled_passes=["gather_simplifier"],
            inputs=[],
            repeats=0,
            warmup=0,
        )
    error = raised.value
    assert error.kind == "crash"
    assert "Check failed" in error.stderr_tail
    assert os.path.isfile(os.path.join(error.reproducer, "module.hlo"))
    with open(os.path.join(error.reproducer, "error.json")) as handle:
        assert json.load(handle)["pass"] == "gather_simplifier"
    assert driver.pool.crashes == 1
    # The caller goes on: the next call gets a fresh worker.
    assert driver.apply_pass(mixed_module, "algsimp").op_count > 0


@pytest.mark.slow
def test_a_hang_becomes_a_timeout_and_the_worker_is_replaced(tmp_path, spin_module, mixed_module):
    driver = PassDriver(pool=CompilerPool(1), use_cache=False, crash_directory=str(tmp_path), timeout=10)
    # XLA compiles the endless loop in well under a second, then runs it forever: a real hang.
    with pytest.raises(CompilerError) as raised:
        driver.call_compiler(
            "compile_and_run",
            "spin",
            spin_module,
            disabled_passes=[],
            inputs=[np.int32(0)],
            repeats=0,
            warmup=0,
        )
    assert raised.value.kind == "timeout"
    assert os.path.isdir(raised.value.reproducer)
    assert driver.pool.timeouts == 1
    # The caller goes on: the next call gets a fresh worker and its own answer.
    assert driver.full_compile_seconds(mixed_module) > 0


def test_a_loaded_text_is_served_from_the_cache_in_another_driver(fresh_driver, data_directory):
    text = (data_directory / "mixed.hlo").read_text()
    module = fresh_driver.load(text)
    assert fresh_driver.calls == {"xla": 1, "cached": 0}  # the canonical form and its features: one call
    op_count = fresh_driver.features(module).op_count
    other = PassDriver(pool=fresh_driver.pool, cache=fresh_driver.cache)
    again = other.load(text)
    assert (again.text, again.fingerprint) == (module.text, module.fingerprint)
    assert other.features(again).op_count == op_count and other.calls == {"xla": 0, "cached": 1}


def test_a_pass_that_aborts_xla_becomes_a_crash_record_with_a_replayable_reproducer(tmp_path):
    from xlabench.graphs import resolve_graphs

    graph = min(resolve_graphs("gpt2"), key=lambda g: g.instruction_count)
    module = HloModule.from_text(graph.hlo_text(), source=graph.name)
    cache = TransitionCache(str(tmp_path / "transitions.sqlite"))
    driver = PassDriver(pool=CompilerPool(1), cache=cache, crash_directory=str(tmp_path))
    # scatter_simplifier alone CHECK-fails on the batched scatter of take_along_axis' gradient.
    with pytest.raises(CompilerError) as raised:
        driver.apply_pass(module, "scatter_simplifier")
    error = raised.value
    assert (error.kind, error.pass_name, error.fingerprint) == (
        "crash",
        "scatter_simplifier",
        module.fingerprint,
    )
    assert "Check failed" in error.message
    replay = HloModule.from_file(os.path.join(error.reproducer, "module.hlo"))
    assert replay.fingerprint == module.fingerprint
    with open(os.path.join(error.reproducer, "passes.txt")) as handle:
        assert handle.read().split() == ["scatter_simplifier"]
    assert driver.apply_pass(module, "cse").op_count > 0
    # A CHECK abort recurs on the same input: it is cached, and asking again costs no compile.
    assert error.deterministic and driver.pool.crashes == 1
    with pytest.raises(CompilerError, match="Check failed"):
        driver.apply_pass(module, "scatter_simplifier")
    assert driver.pool.crashes == 1


@pytest.mark.slow
def test_a_worker_killed_from_outside_is_not_cached(tmp_path):
    from xlabench.graphs import resolve_graphs

    graph = max(resolve_graphs("all"), key=lambda g: g.instruction_count)
    module = HloModule.from_text(graph.hlo_text(), source=graph.name)
    cache = TransitionCache(str(tmp_path / "transitions.sqlite"))
    driver = PassDriver(pool=CompilerPool(1), cache=cache, crash_directory=str(tmp_path))
    driver.features(module)  # starts the worker
    (pid,) = driver.pool.worker_pids()
    # What the out-of-memory killer does: SIGKILL, here in the middle of the largest default compile.
    threading.Timer(1.0, os.kill, (pid, signal.SIGKILL)).start()
    with pytest.raises(CompilerError) as raised:
        driver.run_default_pipeline(module)
    assert raised.value.kind == "crash" and "signal 9" in raised.value.message
    assert not raised.value.deterministic and len(cache) == 0
    # Nothing about the module was learned: the next call compiles it and succeeds.
    assert driver.features(driver.run_default_pipeline(module)).op_count > 0
    assert len(cache) == 1


def test_a_changed_catalogue_table_or_canonical_form_misses_the_cache(
    monkeypatch, fresh_driver, redundant_module
):
    from xlabench.xla.caches import transition_store
    from xlabench.xla.compilers import pass_catalogue

    fresh_driver.run_required_passes(redundant_module)
    fresh_driver.apply_pass(redundant_module, "algsimp")
    assert len(fresh_driver.cache) == 2
    # Editing a class table changes the required-only pipeline: the old record must not be served.
    tables = {name: text for name, text in pass_catalogue.SIMPLIFICATION_PASSES.items() if name != "cse"}
    monkeypatch.setattr(pass_catalogue, "SIMPLIFICATION_PASSES", tables)
    monkeypatch.setattr(pass_catalogue, "_loaded", {})
    assert "cse" not in fresh_driver.catalogue.disabled_for_required_only()
    fresh_driver.run_required_passes(redundant_module)
    assert len(fresh_driver.cache) == 3
    # So does a new version of the canonical form the records hold.
    monkeypatch.setattr(transition_store, "NORMALIZATION_VERSION", transition_store.NORMALIZATION_VERSION + 1)
    fresh_driver.apply_pass(redundant_module, "algsimp")
    assert len(fresh_driver.cache) == 4


def test_a_pass_result_comes_with_its_features(fresh_driver, redundant_module):
    after = fresh_driver.apply_pass(redundant_module, "algsimp")
    calls = dict(fresh_driver.calls)
    assert fresh_driver.features(after).op_count == 5
    assert fresh_driver.calls == calls  # no second compiler call for the features
    # Also when the transition comes from the cache, in another driver.
    other = PassDriver(pool=fresh_driver.pool, cache=fresh_driver.cache)
    assert other.features(other.apply_pass(redundant_module, "algsimp")).op_count == 5
    assert other.calls == {"xla": 0, "cached": 1}


def test_xlas_changes_in_one_compile_played_as_passes_land_on_xlas_count(fresh_driver, mixed_module):
    changes = fresh_driver.default_pipeline_changes(mixed_module)
    names = [name for _, name in changes]
    assert names and all(name in fresh_driver.catalogue.passes for name in names)
    assert names.index("call-inliner") < names.index("algsimp")
    module = mixed_module
    stop = fresh_driver.catalogue.passes["copy-insertion"].position
    for name in names:
        if fresh_driver.catalogue.passes[name].position < stop:  # the rest cannot run alone
            module = fresh_driver.apply_pass(module, name)
    default = fresh_driver.features(fresh_driver.run_default_pipeline(mixed_module)).op_count
    assert fresh_driver.fair_op_count(module, names) == default


def test_a_disabled_pass_is_off_in_every_compile(tmp_path, redundant_module, mixed_module):
    cache = TransitionCache(str(tmp_path / "transitions.sqlite"))
    normal = PassDriver(cache=cache, crash_directory=str(tmp_path / "crashes"))
    changed = PassDriver(cache=cache, crash_directory=str(tmp_path / "crashes"), disabled_passes=["algsimp"])
    # Applying the disabled pass changes nothing; other passes still run -- and a single-pass compile,
    # which turns algsimp off anyway, is the same compile: served from the cache the normal driver filled.
    assert changed.apply_pass(redundant_module, "algsimp").fingerprint == redundant_module.fingerprint
    normal.apply_pass(redundant_module, "cse")
    assert changed.features(changed.apply_pass(redundant_module, "cse")).histogram["multiply"] == 1
    assert changed.calls == {"xla": 0, "cached": 1}
    # XLA's default pipeline without algsimp leaves more ops, and the shared cache keeps the two apart.
    default = normal.features(normal.run_default_pipeline(mixed_module)).op_count
    without = changed.features(changed.run_default_pipeline(mixed_module)).op_count
    assert without > default
    assert normal.features(normal.run_default_pipeline(mixed_module)).op_count == default


def test_disabling_an_unknown_pass_names_it(tmp_path, mixed_module, monkeypatch):
    monkeypatch.setenv("XLABENCH_DISABLE_PASSES", "algsmip")
    driver = PassDriver(use_cache=False, crash_directory=str(tmp_path))
    assert driver.disabled_passes == ("algsmip",)
    with pytest.raises(UnknownPassError, match="algsmip: cannot disable an unknown pass.*algsimp"):
        driver.run_default_pipeline(mixed_module)
