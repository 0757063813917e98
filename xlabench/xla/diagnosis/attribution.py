"""Which pass made two compilers differ: the first place their runs on the same module part.

For XLA's default pipeline: each compiler runs it once on the same module with every pass run dumped
(`pass_runs.pipeline_fingerprints`); the two lists of runs, with the structural fingerprint after each,
are walked side by side from the same start, and the first run that leaves the module different names
the pass: a run both compilers make, with another output, or a run one makes (and the other does not,
there) that changes the module. For a sequence (CompilerGym's `validate()` idea): the stored sequence
is replayed step by step on both compilers, and the first step whose module differs names the pass; if
every step agrees, the required-only pipeline that counts the result is attributed the same way as the
default pipeline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from xlabench.errors import CompilerError
from xlabench.xla.compilers.pass_catalogue import COUNTING_POINT_PASS
from xlabench.xla.driver.hlo_module import HloModule
from xlabench.xla.driver.pass_driver import PassDriver


@dataclass(frozen=True)
class PassRun:
    """The `run`-th run of `pass_name` in round `round` of `pipeline` (a fixed-point pipeline has several)."""

    pipeline: str
    round: int
    pass_name: str
    run: int

    def __str__(self) -> str:
        said = [f"round {self.round}"] if self.round > 1 else []
        said += [f"run {self.run}"] if self.run > 1 else []
        return f"{self.pass_name} in {self.pipeline}" + (f" ({', '.join(said)})" if said else "")


@dataclass(frozen=True)
class PipelineRuns:
    """One compiler's pipeline on one module: the start, and every pass run with the fingerprint after it."""

    start: str
    runs: list[tuple[PassRun, str]]  # (run, fingerprint after), in the order XLA ran them


@dataclass(frozen=True)
class Attribution:
    """Where two compilers first part, and the pass that made it."""

    where: str  # "import" | "default pipeline" | "required passes" | "sequence" | "policy choice"
    pass_name: str | None  # the pass that first made the difference
    pipeline: str | None
    position: int  # where they part: the step of the side-by-side walk (pipeline) or of the sequence, from 0
    effect: str  # what that pass did differently, in words

    def describe(self) -> str:
        """One line: the pass, where, and what it did differently."""
        if self.where == "import":
            return self.effect
        return f"{self.pass_name} ({self.where}): {self.effect}"

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON."""
        return {**asdict(self), "summary": self.describe()}


def pipeline_runs(
    driver: PassDriver, module: HloModule, disabled_passes: list[str] | None = None
) -> PipelineRuns:
    """The driver's pipeline (to the counting point) on `module`, run by run."""
    answer = driver.call_compiler(
        "pipeline_fingerprints",
        "@pipeline-fingerprints",
        module,
        point_pass=COUNTING_POINT_PASS,
        disabled_passes=disabled_passes or [],
    )
    return PipelineRuns(answer["start"], [(PassRun(*run[:4]), run[4]) for run in answer["runs"]])


def first_pipeline_difference(
    base: PipelineRuns, head: PipelineRuns, where: str = "default pipeline"
) -> Attribution | None:
    """The first pass run at which two pipelines part (None: they end on the same module).

    Both lists are walked from the same start, while the module is the same on both. A run both
    compilers make next is judged by its output. Where they make different runs next (a pass one of
    them lacks, a round of a fixed-point loop the other did not need), runs that changed nothing are
    passed over, and so are two runs that gave the same module; a run that changed the module alone
    is the culprit.
    """
    if base.start != head.start:
        return Attribution("import", None, None, 0, "the compilers import the module differently")
    sides = {"base": base.runs, "head": head.runs}
    index = {"base": 0, "head": 0}
    current, step = base.start, 0
    while True:
        nexts = {side: runs[index[side]] for side, runs in sides.items() if index[side] < len(runs)}
        if not nexts:
            return None
        if len(nexts) == 2 and nexts["base"][0] == nexts["head"][0]:
            run = nexts["base"][0]
            if nexts["base"][1] != nexts["head"][1]:
                return Attribution(
                    where, run.pass_name, run.pipeline, step, f"{run}: the same module in, another out"
                )
            current = nexts["base"][1]
            index = {side: position + 1 for side, position in index.items()}
        else:
            idle = [side for side, (_, after) in nexts.items() if after == current]
            if not idle and len(nexts) == 2 and nexts["base"][1] == nexts["head"][1]:
                # Different runs, the same module out (a renamed pass, another instance): still equal.
                current = nexts["base"][1]
                idle = list(nexts)
            if not idle:  # every next run changes the module: a run the other does not make goes first
                later = {
                    side: any(r == run for r, _ in sides[_other(side)][index[_other(side)] :])
                    for side, (run, _) in nexts.items()
                }
                side = next((side for side in nexts if not later[side]), next(iter(nexts)))
                run, other = nexts[side][0], _other(side)
                there = "runs it later, after a change of its own" if later[side] else "does not run it there"
                return Attribution(
                    where,
                    run.pass_name,
                    run.pipeline,
                    step,
                    f"{run} changes the module on {side}; the other compiler {there}"
                    + (f" (its next run: {nexts[other][0]})" if other in nexts else ""),
                )
            for side in idle:  # runs that changed nothing cannot be where the compilers part
                index[side] += 1
        step += 1


def _other(side: str) -> str:
    return "head" if side == "base" else "base"


def attribute_default(base: PassDriver, head: PassDriver, text: str, source: str) -> Attribution | None:
    """The pass of XLA's default pipeline that first makes `text`'s module differ between two compilers."""
    return first_pipeline_difference(
        pipeline_runs(base, base.load(text, source)), pipeline_runs(head, head.load(text, source))
    )


def attribute_sequence(
    base: PassDriver, head: PassDriver, text: str, source: str, sequence: list[str]
) -> Attribution | None:
    """Replay `sequence` on both compilers; the first step whose module differs, else the required passes.

    A step the head compiler lacks or fails on is where they part. None: every step and the
    required-only pipeline agree.
    """
    modules = [base.load(text, source), head.load(text, source)]
    if modules[0].fingerprint != modules[1].fingerprint:
        return Attribution("import", None, None, 0, "the compilers import the module differently")
    for step, action in enumerate(sequence):
        outcomes = []
        for index, driver in enumerate((base, head)):
            if not driver.has_pass(action):
                outcomes.append("lacks it")
                continue
            try:
                modules[index] = driver.apply_action(modules[index], action)[0]
                outcomes.append(modules[index].fingerprint)
            except CompilerError as error:
                outcomes.append(f"fails: {error.message}")
        if outcomes[0] != outcomes[1]:
            said = [o if o == "lacks it" or o.startswith("fails") else f"gives {o[:12]}" for o in outcomes]
            effect = f"step {step + 1} of the sequence: base {said[0]}, head {said[1]}"
            return Attribution("sequence", action, None, step, effect)
    applied = list(sequence)
    return first_pipeline_difference(
        pipeline_runs(base, modules[0], base.catalogue.disabled_for_required_only(applied)),
        pipeline_runs(head, modules[1], head.catalogue.disabled_for_required_only(applied)),
        where="required passes",
    )
