"""What an evaluation produces, as records: one row a graph (`EvaluationRow`), their summary (`Summary`),
and the one place that computes and formats them (`geomean`, `summarize`, `figure`, `worst_text`).

Rows and summaries cross packages as these records; JSON is only how they are stored (`to_json` /
`from_json`), with the short keys every stored file has always used (`I`, `D`, `R`, ...), so files
written before and after read and write the same bytes.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, TypeVar

from xlabench.xla.driver.execution import OutputError

# A graph lost to XLA's default: vs_default below this (the bar every shipped policy is held to).
BELOW = 0.98
# A graph a strategy left unoptimized (R >= I) where XLA's default removes more than this share.
LEFT_UNOPTIMIZED = 0.05
# The fields `xlabench eval --json` and a policy's metadata (`per_graph`) keep of every row.
RESULT_FIELDS = (
    "name", "family", "I", "D", "R", "vs_default", "reduction_ratio", "runtime_ratio", "sequence",
    "calls", "seconds",
)  # fmt: skip

Measured = TypeVar("Measured")


@dataclass(frozen=True)
class BothExecutables(Generic[Measured]):
    """One measurement of both executables: the sequence's and XLA's default's."""

    sequence: Measured
    default: Measured

    def to_json(self) -> dict[str, Any]:
        """{"sequence": ..., "default": ...}."""
        return {"sequence": self.sequence, "default": self.default}


# Not frozen: evaluate_graph fills a row in as it measures (a compiler error may stop it at any field),
# and `baselines update` and the plugin add the measurements they repeat.
@dataclass
class EvaluationRow:
    """One graph's evaluation: op counts, ratios, the sequence and what finding it cost.

    JSON keys (stored files keep them short): `I` = `input_ops` (the graph's raw op count), `D` =
    `default_ops` (after XLA's default pipeline, at the counting point), `R` = `policy_ops` (after the
    strategy's sequence, fairly counted); every other key is the attribute's name. `vs_default` = D / R,
    `reduction_ratio` = (I - R) / (I - D) where I > D, `runtime_ratio` = the sequence's executable's
    median run time over XLA's default's. Optional fields are None when the evaluation did not reach
    them (and then absent from `to_json`), or when a file written by an older version lacks them.
    """

    name: str
    family: str
    input_ops: int | None = None
    default_ops: int | None = None
    policy_ops: int | None = None
    sequence: list[str] | None = None
    calls: int | None = None
    search_depth: int | None = None
    seconds: float | None = None
    vs_default: float | None = None
    reduction_ratio: float | None = None
    runtime_ratio: float | None = None
    # Low-precision graphs: both executables' errors against the module lifted to f32.
    output_errors: list[OutputError] | None = None
    error: str | None = None
    # Set with `error` when the sequence's executable computed something else than XLA's default's.
    outputs_differ: list[str] | None = None
    outputs: BothExecutables[list[Any]] | None = None
    run_seconds: BothExecutables[list[float]] | None = None
    # `baselines update` over several measurements: every ratio measured (`runtime_ratio` is their median).
    runtime_ratios: list[float] | None = None
    # The plugin's second measurement of a runtime failure: both ratios.
    runtime_ratios_measured: list[float | None] | None = None

    @property
    def measured(self) -> bool:
        """Whether the strategy's op count was measured (vs_default known)."""
        return self.vs_default is not None

    @property
    def not_executed(self) -> bool:
        """Counted, but an executable could not be built or run: nothing was compared or timed."""
        return self.error is not None and self.outputs_differ is None

    def to_json(self) -> dict[str, Any]:
        """The whole row (as checkpoints keep it), in the order evaluate_graph measures it."""
        document: dict[str, Any] = {"name": self.name, "family": self.family}
        for key, value in (("I", self.input_ops), ("D", self.default_ops)):
            if value is not None:
                document[key] = value
        if self.policy_ops is not None:  # a result: every figure of it is written, None or not
            document.update({"R": self.policy_ops, "sequence": self.sequence, "calls": self.calls})
            if self.search_depth is not None:
                document["search_depth"] = self.search_depth
            document.update(
                {
                    "seconds": self.seconds,
                    "vs_default": self.vs_default,
                    "reduction_ratio": self.reduction_ratio,
                    "runtime_ratio": self.runtime_ratio,
                }
            )
        optional: tuple[tuple[str, Any], ...] = (
            ("output_errors", self._output_errors_json()),
            ("error", self.error),
            ("outputs_differ", self.outputs_differ),
            ("outputs", self.outputs.to_json() if self.outputs is not None else None),
            ("run_seconds", self.run_seconds.to_json() if self.run_seconds is not None else None),
            ("runtime_ratios", self.runtime_ratios),
            ("runtime_ratios_measured", self.runtime_ratios_measured),
        )
        document.update({key: value for key, value in optional if value is not None})
        return document

    def result_json(self, details: bool = True) -> dict[str, Any]:
        """The row as `xlabench eval --json` writes it: every RESULT_FIELDS key (None where unmeasured),
        then, with `details`, `error`, `search_depth` and `output_errors` where there are any. Without
        `details`: the row as a policy's metadata keeps it (`per_graph`)."""
        whole = self.to_json()
        document = {key: whole.get(key) for key in RESULT_FIELDS}
        if details:
            document.update(
                {key: whole[key] for key in ("error", "search_depth", "output_errors") if key in whole}
            )
        return document

    def _output_errors_json(self) -> list[dict[str, Any]] | None:
        return None if self.output_errors is None else [asdict(error) for error in self.output_errors]

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> EvaluationRow:
        """A row as any version stored it (a checkpoint, `eval --json`, a policy's `per_graph`, a baseline
        file): keys it lacks are None."""

        def both(key: str) -> BothExecutables[Any] | None:
            value = document.get(key)
            return BothExecutables(value["sequence"], value["default"]) if value else None

        output_errors = document.get("output_errors")
        return cls(
            name=document["name"],
            family=document["family"],
            input_ops=document.get("I"),
            default_ops=document.get("D"),
            policy_ops=document.get("R"),
            sequence=document.get("sequence"),
            calls=document.get("calls"),
            search_depth=document.get("search_depth"),
            seconds=document.get("seconds"),
            vs_default=document.get("vs_default"),
            reduction_ratio=document.get("reduction_ratio"),
            runtime_ratio=document.get("runtime_ratio"),
            output_errors=None
            if output_errors is None
            else [OutputError(**error) for error in output_errors],
            error=document.get("error"),
            outputs_differ=document.get("outputs_differ"),
            outputs=both("outputs"),
            run_seconds=both("run_seconds"),
            runtime_ratios=document.get("runtime_ratios"),
            runtime_ratios_measured=document.get("runtime_ratios_measured"),
        )


@dataclass(frozen=True)
class WorstGraph:
    """The worst graph of a summary: in an evaluation, the lowest `value` = vs_default (D / R; JSON key
    `vs_default`); in `bench replay`, the D / replay ratio furthest from 1 (JSON key `ratio`)."""

    name: str
    value: float

    def to_json(self, value_key: str = "vs_default") -> dict[str, Any]:
        """{"name": ..., value_key: ...}."""
        return {"name": self.name, value_key: self.value}


@dataclass(frozen=True)
class SummaryPart:
    """Geomeans, worst graph and compiler calls over some rows (all, or one family's).

    JSON keys are the attribute names. `outputs_differ`, `not_executed`, `below` and `left_unoptimized`
    are None in summaries stored before they were counted (and then absent from `to_json`), never in
    one `summarize` makes.
    """

    graphs: int
    failed: int
    geomean_vs_default: float | None
    geomean_reduction_ratio: float | None
    geomean_runtime_ratio: float | None
    worst: WorstGraph | None
    calls: int
    # Counted, but the sequence's executable computed something else than XLA's default.
    outputs_differ: int | None = None
    # Counted, but an executable could not be built or run: nothing was compared or timed.
    not_executed: int | None = None
    below: int | None = None
    # Left as it came while XLA's default removes more than LEFT_UNOPTIMIZED of it.
    left_unoptimized: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The part as `xlabench eval --json` and a policy's metadata store it."""
        document: dict[str, Any] = {"graphs": self.graphs, "failed": self.failed}
        for key, value in (("outputs_differ", self.outputs_differ), ("not_executed", self.not_executed)):
            if value is not None:
                document[key] = value
        document |= {
            "geomean_vs_default": self.geomean_vs_default,
            "geomean_reduction_ratio": self.geomean_reduction_ratio,
            "geomean_runtime_ratio": self.geomean_runtime_ratio,
            "worst": None if self.worst is None else self.worst.to_json(),
            "calls": self.calls,
        }
        for key, value in (("below", self.below), ("left_unoptimized", self.left_unoptimized)):
            if value is not None:
                document[key] = value
        return document

    @staticmethod
    def _fields(document: dict[str, Any]) -> dict[str, Any]:
        worst = document.get("worst")
        return {
            "graphs": document["graphs"],
            "failed": document["failed"],
            "outputs_differ": document.get("outputs_differ"),
            "not_executed": document.get("not_executed"),
            "geomean_vs_default": document.get("geomean_vs_default"),
            "geomean_reduction_ratio": document.get("geomean_reduction_ratio"),
            "geomean_runtime_ratio": document.get("geomean_runtime_ratio"),
            "worst": None if worst is None else WorstGraph(worst["name"], worst["vs_default"]),
            "calls": document.get("calls", 0),
            "below": document.get("below"),
            "left_unoptimized": document.get("left_unoptimized"),
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> SummaryPart:
        """A part as any version stored it."""
        return cls(**cls._fields(document))


@dataclass(frozen=True)
class Summary(SummaryPart):
    """The summary of an evaluation: over all rows, and per family (`families`, sorted by name)."""

    families: dict[str, SummaryPart] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The summary as `xlabench eval --json` and a policy's metadata (`eval`) store it."""
        return {
            **super().to_json(),
            "families": {family: part.to_json() for family, part in self.families.items()},
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Summary:
        """A summary as any version stored it (extra keys, such as a policy's `per_graph`, are ignored)."""
        families = {
            family: SummaryPart.from_json(part) for family, part in document.get("families", {}).items()
        }
        return cls(**cls._fields(document), families=families)


def geomean(values: list[float]) -> float | None:
    """Geometric mean, or None for no values."""
    return math.exp(statistics.fmean(math.log(value) for value in values)) if values else None


def _summary_fields(selected: list[EvaluationRow]) -> dict[str, Any]:
    """The figures of a SummaryPart over `selected`."""
    measured = [row for row in selected if row.measured]
    worst = min(measured, key=lambda row: row.vs_default or 0.0, default=None)
    reductions = [row.reduction_ratio for row in measured if (row.reduction_ratio or 0) > 0]
    runtimes = [row.runtime_ratio for row in measured if row.runtime_ratio]
    return {
        "graphs": len(selected),
        "failed": len(selected) - len(measured),
        "outputs_differ": sum(row.outputs_differ is not None for row in measured),
        "not_executed": sum(row.not_executed for row in measured),
        "geomean_vs_default": geomean([row.vs_default for row in measured if row.vs_default is not None]),
        "geomean_reduction_ratio": geomean([ratio for ratio in reductions if ratio is not None]),
        "geomean_runtime_ratio": geomean([ratio for ratio in runtimes if ratio is not None]),
        "worst": None
        if worst is None or worst.vs_default is None
        else WorstGraph(worst.name, worst.vs_default),
        "calls": sum(row.calls or 0 for row in measured),
        "below": sum((row.vs_default or 0.0) < BELOW for row in measured),
        "left_unoptimized": sum(_left_unoptimized(row) for row in measured),
    }


def _left_unoptimized(row: EvaluationRow) -> bool:
    """R >= I while XLA's default removes more than LEFT_UNOPTIMIZED of the graph's ops."""
    input_ops, default_ops, policy_ops = row.input_ops, row.default_ops, row.policy_ops
    assert input_ops is not None and default_ops is not None and policy_ops is not None  # measured
    return policy_ops >= input_ops and default_ops < (1 - LEFT_UNOPTIMIZED) * input_ops


def summarize(rows: list[EvaluationRow]) -> Summary:
    """Geomeans, worst graph and compiler calls, overall and per family.

    The reduction ratio's geomean is over the graphs where it is defined (I > D) and positive.
    """
    families = sorted({row.family for row in rows})
    return Summary(
        **_summary_fields(rows),
        families={
            family: SummaryPart(**_summary_fields([row for row in rows if row.family == family]))
            for family in families
        },
    )


def figure(value: float | None, digits: int = 4) -> str:
    """A number for a table: `digits` decimals, or "-" when there is none."""
    return "-" if value is None else f"{value:.{digits}f}"


def worst_text(worst: WorstGraph | None) -> str:
    """The worst graph of a summary as "name (value)" with four decimals, or "-" when there is none."""
    return "-" if worst is None else f"{worst.name} ({worst.value:.4f})"
