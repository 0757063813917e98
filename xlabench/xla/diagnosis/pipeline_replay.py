"""Replay of XLA's own default pipeline through `apply_pass`, one single pass at a time.

This is the fidelity check of the whole driver: every comparison of a pass sequence with XLA's
default pipeline assumes that sequences of single passes can express what the pipeline does. The
replay applies, in pipeline order, every pass that runs before the counting point -- required and
action passes alike -- iterating each fixed-point pipeline (XLA's `HloPassFix`) until a whole round
leaves the module's fingerprint unchanged, as XLA does. The result is then counted exactly as a
policy's sequence is (`PassDriver.fair_op_count`), so replay and default should land on the same count.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from xlabench.errors import CompilerError
from xlabench.xla.compilers.pass_catalogue import COUNTING_POINT_PASS, PassCatalogue, instance_key
from xlabench.xla.driver.hlo_module import HloModule
from xlabench.xla.driver.pass_driver import PassDriver

# XLA's HloPassFix gives up after this many rounds (hlo_pass_fix.h, kIterationLimit).
FIXED_POINT_ROUND_LIMIT = 25


@dataclass(frozen=True)
class PipelineStage:
    """One node of the pipeline before the counting point: a pass, or a pipeline of stages."""

    name: str
    children: tuple[PipelineStage, ...] = ()
    is_pipeline: bool = False
    fixed_point: bool = False
    # For a pass: the pipelines around it (outermost first) and which time it appears directly in
    # the innermost one, so the replay runs this very instance of the pass with its own options.
    pipeline_path: tuple[str, ...] = ()
    occurrence: int = 1

    def instance_key(self, catalogue: PassCatalogue) -> str:
        """The catalogue's key of this pass instance (`catalogue.instance_key`)."""
        first = self.pipeline_path == catalogue.passes[self.name].ancestors and self.occurrence == 1
        return instance_key(self.name, self.pipeline_path, self.occurrence, first)

    def pass_names(self) -> list[str]:
        """Every pass run by one round of this stage, in order."""
        if not self.is_pipeline:
            return [self.name]
        return [name for child in self.children for name in child.pass_names()]


def default_pipeline_stages(catalogue: PassCatalogue) -> list[PipelineStage]:
    """XLA's CPU pipeline as stages, cut just before the first run of the counting-point pass."""
    reached = False

    def build(nodes: list[dict[str, Any]], path: tuple[str, ...]) -> list[PipelineStage]:
        nonlocal reached
        stages: list[PipelineStage] = []
        seen: dict[str, int] = {}
        for node in nodes:
            if reached:
                break
            if "children" in node:
                children = build(node["children"], (*path, node["name"]))
                if children:
                    stages.append(
                        PipelineStage(node["name"], tuple(children), True, bool(node.get("fixed_point")))
                    )
            elif node["name"] == COUNTING_POINT_PASS:
                reached = True
            else:
                seen[node["name"]] = seen.get(node["name"], 0) + 1
                stages.append(PipelineStage(node["name"], pipeline_path=path, occurrence=seen[node["name"]]))
        return stages

    stages = build(catalogue.tree, ())
    if not reached:
        raise RuntimeError(f"the installed XLA CPU pipeline never runs {COUNTING_POINT_PASS}")
    return stages


@dataclass
class Replay:
    """What a replay did: the module it ended with and every single-pass application."""

    module: HloModule
    applications: int = 0
    passes: list[str] = field(default_factory=list)  # instance keys, in the order applied
    # The applications that changed the module (instance keys, in order): XLA's order, minus no-ops.
    effective: list[str] = field(default_factory=list)
    # The module after each of those applications, in the same order.
    states: list[HloModule] = field(default_factory=list)
    errors: list[CompilerError] = field(default_factory=list)
    fixed_point_rounds: dict[str, list[int]] = field(default_factory=dict)


def replay_default_pipeline(driver: PassDriver, module: HloModule) -> Replay:
    """Apply XLA's default pipeline to `module` one pass at a time, up to the counting point.

    A pass that fails leaves the module as it was; its error is recorded and the replay goes on.
    """
    replay = Replay(module)

    def run(stage: PipelineStage) -> None:
        if not stage.is_pipeline:
            replay.applications += 1
            replay.passes.append(stage.instance_key(driver.catalogue))
            try:
                before = replay.module
                replay.module = driver.apply_pass(before, stage.name, stage.pipeline_path, stage.occurrence)
                if replay.module.fingerprint != before.fingerprint:
                    replay.effective.append(replay.passes[-1])
                    replay.states.append(replay.module)
            except CompilerError as error:
                replay.errors.append(error)
            return
        if not stage.fixed_point:
            for child in stage.children:
                run(child)
            return
        rounds = 0
        while rounds < FIXED_POINT_ROUND_LIMIT:
            rounds += 1
            before = replay.module.fingerprint
            for child in stage.children:
                run(child)
            if replay.module.fingerprint == before:
                break
        replay.fixed_point_rounds.setdefault(stage.name, []).append(rounds)

    for stage in default_pipeline_stages(driver.catalogue):
        run(stage)
    return replay


@dataclass(frozen=True)
class ReplayState:
    """A module on the way to the counting point: the pass that made it, its fingerprint and op count."""

    pass_name: str  # the replay's instance key, or "pipeline/pass" for XLA's run
    fingerprint: str
    op_count: int


@dataclass
class ReplayTrace:
    """XLA's pipeline and the replay side by side, state by state, and where they part."""

    start: ReplayState
    xla: list[ReplayState]
    replay: list[ReplayState]
    # The last module both reach (the start when none other), and the pass each side runs next from it.
    last_common: ReplayState
    xla_next: ReplayState | None
    replay_next: ReplayState | None

    def parting(self) -> str:
        """One line: where XLA's pipeline and the replay part, or that they do not."""
        xla_end, replay_end = (self.xla or [self.start])[-1], (self.replay or [self.start])[-1]
        if xla_end.fingerprint == replay_end.fingerprint:
            return f"no parting: the replay ends on XLA's module ({xla_end.op_count} ops)"

        def side(state: ReplayState | None) -> str:
            return f"{state.pass_name} -> {state.op_count} ops" if state else "nothing more"

        return (
            f"they part after {self.last_common.pass_name} ({self.last_common.op_count} ops): "
            f"XLA runs {side(self.xla_next)}; the replay applies {side(self.replay_next)}"
        )


def trace_replay(driver: PassDriver, module: HloModule, replay: Replay) -> ReplayTrace:
    """Match the replay's states against XLA's own modules (canonicalized) run by run; find where they part.

    Every module XLA's pipeline makes is brought to xlabench's canonical form, so a state of the
    replay and one of XLA's are the same module exactly when their fingerprints are equal. The
    parting is the last state XLA reaches that the replay reaches too, and the next change on each
    side: the pass whose effect the replay does not reproduce (docs/design.md, "Replay gaps").
    """
    point = COUNTING_POINT_PASS
    answer = driver.call_compiler("pipeline_states", "@pipeline-states", module, point_pass=point)
    start = ReplayState("start", module.fingerprint, driver.features(module).op_count)
    xla = [
        ReplayState(f"{pipeline}/{name}", fingerprint, count)
        for pipeline, name, fingerprint, count in answer["states"]
    ]
    ours = [
        ReplayState(key, state.fingerprint, driver.features(state).op_count)
        for key, state in zip(replay.effective, replay.states, strict=True)
    ]
    reached = {start.fingerprint: -1, **{state.fingerprint: index for index, state in enumerate(ours)}}
    last_common, xla_next, replay_next = start, (xla[0] if xla else None), (ours[0] if ours else None)
    for index, state in enumerate(xla):
        if state.fingerprint in reached:
            mine = reached[state.fingerprint]
            last_common = state
            later = (other for other in xla[index + 1 :] if other.fingerprint != state.fingerprint)
            xla_next = next(later, None)
            replay_next = ours[mine + 1] if mine + 1 < len(ours) else None
    return ReplayTrace(start, xla, ours, last_common, xla_next, replay_next)
