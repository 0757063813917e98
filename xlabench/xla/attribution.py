"""Which pass made two compilers differ: the first place their runs on the same module part.

For XLA's default pipeline: each compiler runs it once on the same module with every pass dumped
(`compiler.pipeline_fingerprints`); the runs that changed the module, with the structural fingerprint
after each, are lined up, and the first position where pass or fingerprint differ names the pass.
For a sequence (CompilerGym's `validate()` idea): the stored sequence is replayed step by step on both
compilers, and the first step whose module differs names the pass; if every step agrees, the
required-only pipeline that counts the result is attributed the same way as the default pipeline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from xlabench.errors import CompilerError
from xlabench.xla.catalogue import COUNTING_POINT_PASS, PassCatalogue
from xlabench.xla.driver import PassDriver
from xlabench.xla.module import HloModule


@dataclass(frozen=True)
class PassRun:
    """A run that changed the module: the k-th such run of `pass_name` in `pipeline`."""

    pipeline: str
    pass_name: str
    run: int

    def __str__(self) -> str:
        return f"{self.pass_name} in {self.pipeline}" + (f" (run {self.run})" if self.run > 1 else "")


@dataclass(frozen=True)
class PipelineRuns:
    """One compiler's pipeline on one module: the start, and the runs that changed it (XLA dumps only those).

    `catalogue` places a run in the pipeline: which of two runs comes first when the compilers part.
    """

    start: str
    changes: list[tuple[PassRun, str]]  # (run, fingerprint after)
    catalogue: PassCatalogue

    def position(self, run: PassRun) -> int | None:
        """Where the pass first stands in this compiler's pipeline (flattened), inside `run.pipeline`."""
        for index, (pipeline, pass_name) in enumerate(_flattened(self.catalogue.tree, "")):
            if pass_name == run.pass_name and pipeline.replace(" ", "_") == run.pipeline:
                return index
        return None


def _flattened(nodes: list[dict[str, Any]], parent: str) -> list[tuple[str, str]]:
    """(pipeline, pass) of every pass of a catalogue tree, in pipeline order."""
    found: list[tuple[str, str]] = []
    for node in nodes:
        if "children" in node:
            found += _flattened(node["children"], node["name"])
        else:
            found.append((parent, node["name"]))
    return found


@dataclass(frozen=True)
class Attribution:
    """Where two compilers first part, and the pass that made it."""

    where: str  # "import" | "default pipeline" | "required passes" | "sequence" | "policy choice"
    pass_name: str | None  # the pass that first made the difference
    pipeline: str | None
    position: int  # the index of the change (pipeline) or of the step (sequence), from 0
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
    """The driver's pipeline (to the counting point) on `module`, change by change."""
    answer = driver.call_compiler(
        "pipeline_fingerprints",
        "@pipeline-fingerprints",
        module,
        point_pass=COUNTING_POINT_PASS,
        disabled_passes=disabled_passes or [],
    )
    changes = [(PassRun(*change[:3]), change[3]) for change in answer["changes"]]
    return PipelineRuns(answer["start"], changes, driver.catalogue)


def first_pipeline_difference(
    base: PipelineRuns, head: PipelineRuns, where: str = "default pipeline"
) -> Attribution | None:
    """The first pass run at which two pipelines part (None: the same changes, in the same order).

    Up to the first change that differs, both did the same. There, either the same run gave another
    module, or one compiler changed the module with a pass whose run on the other changed nothing (or
    that the other does not run there): of the two compilers' next changes, the one whose pass stands
    first in the pipeline is the culprit.
    """
    if base.start != head.start:
        return Attribution("import", None, None, 0, "the compilers import the module differently")
    for index in range(max(len(base.changes), len(head.changes))):
        ours = base.changes[index][0] if index < len(base.changes) else None
        theirs = head.changes[index][0] if index < len(head.changes) else None
        if ours == theirs:
            if base.changes[index][1] == head.changes[index][1]:
                continue
            assert ours is not None
            return Attribution(where, ours.pass_name, ours.pipeline, index, f"{ours}: its output differs")
        if theirs is None or (ours is not None and _first(ours, theirs, base, head) is ours):
            culprit, side, other, next_change = ours, "base", head, theirs
        else:
            culprit, side, other, next_change = theirs, "head", base, ours
        assert culprit is not None
        there = (
            "changes nothing there (or has it off)"
            if other.position(culprit) is not None
            else "does not run it there"
        )
        effect = f"{culprit} changes the module on {side}; the other compiler {there}" + (
            f" (its next change: {next_change})" if next_change else ""
        )
        return Attribution(where, culprit.pass_name, culprit.pipeline, index, effect)
    return None


def _first(ours: PassRun, theirs: PassRun, base: PipelineRuns, head: PipelineRuns) -> PassRun:
    """Of base's and head's next changing runs, the one whose pass stands first in the pipeline."""
    if ours.pass_name == theirs.pass_name and ours.pipeline == theirs.pipeline:
        return ours if ours.run < theirs.run else theirs
    for runs in (head, base):
        mine, yours = runs.position(ours), runs.position(theirs)
        if mine is not None and yours is not None:
            return ours if mine <= yours else theirs
    return ours


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
