"""What a single-pass compile removes before the pass: only the extractions each compile's import adds."""

from __future__ import annotations

from xlabench.graphs import resolve_graphs
from xlabench.xla.diagnosis.pipeline_replay import replay_default_pipeline
from xlabench.xla.worker import pass_runs

# A loop as the StableHLO import leaves it: every result of the `while` and every element of the
# body's state extracted, `%unused_result` and `%unused_element` by nothing.
IMPORTED_LOOP = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

%body (state: (s32[], f32[4])) -> (s32[], f32[4]) {
  %state = (s32[], f32[4]{0}) parameter(0)
  %i = s32[] get-tuple-element(%state), index=0
  %unused_element = f32[4]{0} get-tuple-element(%state), index=1
  %one = s32[] constant(1)
  %next = s32[] add(%i, %one)
  %x = f32[4]{0} broadcast(%one), dimensions={}
  ROOT %out = (s32[], f32[4]{0}) tuple(%next, %x)
}

%cond (cond_state: (s32[], f32[4])) -> pred[] {
  %cond_state = (s32[], f32[4]{0}) parameter(0)
  %cond_i = s32[] get-tuple-element(%cond_state), index=0
  %limit = s32[] constant(10)
  ROOT %less = pred[] compare(%cond_i, %limit), direction=LT
}

ENTRY %main (a: f32[4]) -> f32[4] {
  %zero = s32[] constant(0)
  %a = f32[4]{0} parameter(0)
  %start = (s32[], f32[4]{0}) tuple(%zero, %a)
  %loop = (s32[], f32[4]{0}) while(%start), condition=%cond, body=%body
  %unused_result = s32[] get-tuple-element(%loop), index=0
  ROOT %y = f32[4]{0} get-tuple-element(%loop), index=1
}
"""


def test_a_loop_with_only_the_imports_extractions_unused_is_cleaned_up():
    assert pass_runs._needs_loop_cleanup(IMPORTED_LOOP)
    without_loops = IMPORTED_LOOP.replace(" while(", " call(").replace(
        "condition=%cond, body=%body", "to_apply=%body"
    )
    assert not pass_runs._needs_loop_cleanup(without_loops)


def test_other_dead_code_is_left_for_the_pass_to_see():
    dead = IMPORTED_LOOP.replace("  ROOT %y", "  %dead = f32[4]{0} negate(%a)\n  ROOT %y")
    assert not pass_runs._needs_loop_cleanup(dead)


def test_a_cleanup_that_removed_more_than_extractions_is_refused():
    removed = {"%unused_result", "%unused_element"}
    cleaned = "\n".join(
        line for line in IMPORTED_LOOP.splitlines() if line.split(" = ")[0].strip() not in removed
    )
    assert pass_runs._only_extractions_removed(IMPORTED_LOOP, cleaned)
    # XLA prints the rest in another order once instructions are gone: the same module.
    reordered = cleaned.replace(
        "  %zero = s32[] constant(0)\n  %a = f32[4]{0} parameter(0)",
        "  %a = f32[4]{0} parameter(0)\n  %zero = s32[] constant(0)",
    )
    assert reordered != cleaned and pass_runs._only_extractions_removed(IMPORTED_LOOP, reordered)
    without_next = cleaned.replace("  %x = f32[4]{0} broadcast(%one), dimensions={}\n", "")
    assert not pass_runs._only_extractions_removed(IMPORTED_LOOP, without_next)


def test_xlas_order_replayed_on_a_cg_loop_ends_on_xlas_module(fresh_driver):
    # Without the cleanup the import's unused results of the CG `while` kept a repeated element of the
    # loop state alive: 91 ops against XLA's 87.
    graph = resolve_graphs("control_flow-cg-n32-b2-plain-f32")[0]
    module = fresh_driver.load(graph.hlo_text(), graph.name)
    replay = replay_default_pipeline(fresh_driver, module)
    default = fresh_driver.run_default_pipeline(module)
    assert fresh_driver.fair_op_count(replay.module, replay.passes) == fresh_driver.features(default).op_count
