"""`xlabench compare`: several `xlabench eval --json` results side by side, per split and family.

Each result file is one strategy (a policy, a search, replay) on one graph SPEC; a policy version
directory (`policies/NAME/vX.Y`) stands for the evaluations `xlabench retrain` stored in its
metadata, one per SPEC, and brings its training curve. Written atomically into the report
directory: `report.md`, a Markdown table per SPEC (strategy, geomean vs_default per family and
overall, worst graph, graphs below 0.98, compiler calls per graph); `report.png`, the overall
geomeans; and, when policies are among them, `training_curves.png` (mean episode return vs
environment steps).

Versions trained over several seeds (`retrain --seeds`) also bring every seed's score on every graph
of their selection split: the report compares them as the field does (rliable, Agarwal et al. 2021):
geomean and IQM with 95% stratified-bootstrap intervals, the probability of improving on the warm
start and on the first such version given, and `performance_profiles_SPEC.png`. A `retrain --seed-scores`
file brings the same for a run that wrote no version (every seed numerically worse), with the reasons.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xlabench.agents.seeds import (
    SEED_SCORES_FORMAT,
    SeedScores,
    performance_profiles_figure,
    probability_of_improvement,
    statistics,
)
from xlabench.errors import UserInputError
from xlabench.eval.evaluation_records import BELOW, EvaluationRow, figure, summarize, worst_text
from xlabench.files import png_bytes, write_atomically


def load_result(path: str) -> dict[str, Any]:
    """One `xlabench eval --json` document (its `graphs` read as EvaluationRow records), or one clear
    error naming the file."""
    try:
        with open(path) as handle:
            document = json.load(handle)
        document["graphs"], document["policy"], document["graphs_spec"]  # noqa: B018 (shape check)
        document["graphs"] = [EvaluationRow.from_json(row) for row in document["graphs"]]
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such file") from None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserInputError(f"{path}: not an `xlabench eval --json` result ({error})") from None
    return document


def load_policy_results(path: str) -> list[dict[str, Any]]:
    """The evaluations stored in a policy version's metadata, as `load_result` reads eval results."""
    try:
        with open(os.path.join(path, "metadata.json")) as handle:
            metadata = json.load(handle)
        label = f"{metadata['name']}@{metadata['version']} ({metadata['algorithm']})"
        training = training_summary(metadata)
        return [
            {
                "policy": label,
                "graphs_spec": spec,
                "graphs": [EvaluationRow.from_json(row) for row in part["per_graph"]],
                "curve": metadata.get("training", {}).get("curve") or [],
                "training": training,
            }
            for spec, part in metadata["eval"].items()
        ]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserInputError(f"{path}: not a policy version directory ({error})") from None


@dataclass
class SeedRuns:
    """A policy version trained over several seeds (`retrain --seeds`): each seed's selection scores."""

    label: str
    selected_on: str
    seeds: list[SeedScores]
    # Why no version was written (a line per graph: numerically worse outputs); empty when one was.
    not_written: list[str] = field(default_factory=list)

    def matrix(self, which: str = "policy") -> np.ndarray:
        """(seeds x graphs) `vs_default` of the policies (or of their warm starts)."""
        return np.array([seed.policy if which == "policy" else seed.warm_start for seed in self.seeds])


def load_seed_runs(path: str) -> SeedRuns | None:
    """A policy version's per-seed scores, or a `retrain --seed-scores` file's; None for a version trained
    on one seed (or made before per-graph seed scores were stored), or an eval result."""
    if not os.path.isdir(path):
        document = seed_scores_document(path)
        if document is None:
            return None
        label = f"{document['name']} ({document['algorithm']})"
        if document["not_written"]:
            label += ", not written"
        try:
            seeds = [SeedScores.from_json(entry) for entry in document["seeds"]]
        except (KeyError, TypeError, ValueError) as error:
            raise UserInputError(f"{path}: a seed's scores are incomplete ({error!r})") from None
        return SeedRuns(label, document["selected_on"], seeds, list(document["not_written"]))
    try:
        with open(os.path.join(path, "metadata.json")) as handle:
            metadata = json.load(handle)
        entries = metadata.get("seeds") or []
        if not entries or any("vs_default" not in entry for entry in entries):
            return None
        label = f"{metadata['name']}@{metadata['version']} ({metadata['algorithm']})"
        return SeedRuns(label, metadata["selected_on"], [SeedScores.from_json(entry) for entry in entries])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserInputError(f"{path}: not a policy version directory ({error})") from None


def seed_scores_document(path: str) -> dict[str, Any] | None:
    """The document of a `retrain --seed-scores` file, or None for any other file (an eval result)."""
    try:
        with open(path) as handle:
            document = json.load(handle)
    except FileNotFoundError:
        raise UserInputError(f"{path}: no such file") from None
    except (OSError, ValueError) as error:
        raise UserInputError(f"{path}: not a JSON file ({error})") from None
    if not isinstance(document, dict) or document.get("format") != SEED_SCORES_FORMAT:
        return None
    try:
        document["name"], document["algorithm"], document["selected_on"], document["seeds"]  # noqa: B018
        document["not_written"]  # noqa: B018
    except KeyError as error:
        raise UserInputError(f"{path}: not a `retrain --seed-scores` file (no {error})") from None
    return document


def seeds_markdown(runs: list[SeedRuns]) -> list[str]:
    """Per selection split: each version's seeds compared with rliable (intervals over seeds and graphs)."""

    def interval(part: dict[str, float]) -> str:
        return f"{part['estimate']:.4f} [{part['low']:.4f}, {part['high']:.4f}]"

    lines: list[str] = []
    for spec, group in by_selection(runs).items():
        first = group[0]
        columns = ["policy", "seeds", "graphs", "geomean vs_default", "IQM", "warm start geomean",
                   "P(> its warm start)", f"P(> {first.label})"]  # fmt: skip
        lines += [
            f"## Over seeds, on {spec}",
            "",
            "95% intervals: rliable's stratified bootstrap over seeds and graphs. P(X > Y): the probability"
            " that a seed of X scores above a seed of Y on a graph, averaged over graphs.",
            "",
            "| " + " | ".join(columns) + " |",
            "|---" * len(columns) + "|",
        ]
        for run in group:
            result = statistics(run.seeds)
            warm = "warm_start" in result
            against_first = (
                "-" if run is first else interval(probability_of_improvement(run.matrix(), first.matrix()))
            )
            cells = [
                run.label,
                str(len(run.seeds)),
                str(result["graphs"]),
                interval(result["policy"]["geomean"]),
                interval(result["policy"]["iqm"]),
                interval(result["warm_start"]["geomean"]) if warm else "-",
                interval(result["probability_of_improvement"]) if warm else "-",
                against_first,
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        for run in group:
            if run.not_written:
                lines += [
                    f"{run.label}: no version, so no evaluation on other splits: outputs numerically worse "
                    "than XLA's default (`retrain` writes no such version) --",
                    "",
                    *(f"- {line}" for line in run.not_written),
                    "",
                ]
    return lines


def by_selection(runs: list[SeedRuns]) -> dict[str, list[SeedRuns]]:
    """Runs grouped by selection split; within a group every run must have scored the same graphs."""
    groups: dict[str, list[SeedRuns]] = defaultdict(list)
    for run in runs:
        groups[run.selected_on].append(run)
    for spec, group in groups.items():
        for run in group[1:]:
            if run.seeds[0].graphs != group[0].seeds[0].graphs:
                raise UserInputError(
                    f"{run.label} and {group[0].label} were judged on different {spec} graphs: "
                    "retrain them on the same selection split"
                )
    return groups


def training_summary(metadata: dict[str, Any]) -> dict[str, Any]:
    """How a policy version was trained, from its metadata: a row of the report's training table."""
    training, warm_start = metadata["training"], metadata.get("warm_start") or {}
    return {
        "algorithm": metadata["algorithm"],
        "graphs": training["graphs"],
        "seed": metadata["seed"],
        "warm_start_seconds": warm_start.get("seconds"),
        "steps": training["steps"],
        "episodes": training["episodes"],
        "seconds": training["seconds"],
    }


def load_results(paths: list[str]) -> list[dict[str, Any]]:
    """Every result file and every policy directory's stored evaluations, in the order given."""
    documents: list[dict[str, Any]] = []
    for path in paths:
        if os.path.isdir(path):
            documents += load_policy_results(path)
        elif seed_scores_document(path) is None:  # seed scores have no evaluation: `load_seed_runs`
            documents.append(load_result(path))
    return documents


def markdown(title: str, documents: list[dict[str, Any]], seed_runs: list[SeedRuns] | None = None) -> str:
    """A table per graph SPEC: one row per strategy; then versions trained over seeds, compared."""
    by_spec: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for document in documents:
        by_spec[document["graphs_spec"]].append(document)
    lines = [f"# {title}", ""]
    for spec, group in by_spec.items():
        summaries = [summarize(document["graphs"]) for document in group]
        families = sorted({family for summary in summaries for family in summary.families})
        columns = [
            "strategy",
            *families,
            "**all**",
            "worst graph",
            f"graphs < {BELOW}",
            "calls / graph",
            "failed",
        ]
        lines += [f"## {spec}", "", "| " + " | ".join(columns) + " |", "|---" * len(columns) + "|"]
        for document, summary in zip(group, summaries, strict=True):
            cells = [
                figure(part.geomean_vs_default if (part := summary.families.get(family)) else None)
                for family in families
            ]
            measured = summary.graphs - summary.failed
            per_graph = f"{summary.calls / measured:.1f}" if measured else "-"
            lines.append(
                f"| {document['policy']} | "
                + " | ".join(cells)
                + f" | **{figure(summary.geomean_vs_default)}**"
                f" | {worst_text(summary.worst)} | {summary.below} | {per_graph} | {summary.failed} |"
            )
        lines.append("")
    trained = {document["policy"]: document["training"] for document in documents if document.get("training")}
    if trained:
        columns = ["policy", "algorithm", "trained on", "seed", "warm start", "RL steps", "episodes"]
        columns.append("warm start + RL wall time")
        lines += ["## How the policies were trained", "", "| " + " | ".join(columns) + " |"]
        lines.append("|---" * len(columns) + "|")
        for label, row in trained.items():
            warm = (
                "none" if row["warm_start_seconds"] is None else f"{row['warm_start_seconds'] / 60:.1f} min"
            )
            lines.append(
                f"| {label} | {row['algorithm']} | {row['graphs']} | {row['seed']} | {warm} | "
                f"{row['steps']:,} | {row['episodes']:,} | {row['seconds'] / 60:.1f} min |"
            )
        lines.append("")
    lines += seeds_markdown(seed_runs or [])
    lines.append(
        "Geomean of vs_default = D / R per family (above 1: fewer ops than XLA's default pipeline); "
        f"graphs < {BELOW}: how many graphs have a vs_default below {BELOW}."
    )
    return "\n".join(lines) + "\n"


def plot(title: str, documents: list[dict[str, Any]]) -> bytes:
    """PNG: overall geomean vs_default per strategy, one group of bars per graph SPEC."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    specs = list(dict.fromkeys(document["graphs_spec"] for document in documents))
    strategies = list(dict.fromkeys(document["policy"] for document in documents))
    values = {
        (document["graphs_spec"], document["policy"]): summarize(document["graphs"]).geomean_vs_default
        for document in documents
    }
    figure, axes = plt.subplots(figsize=(min(12.0, max(6.0, 0.6 * len(strategies) * len(specs))), 4.5))
    width = 0.8 / max(1, len(strategies))
    for index, strategy in enumerate(strategies):
        heights = [(values.get((spec, strategy)) or 1.0) - 1.0 for spec in specs]
        axes.bar([s + index * width for s in range(len(specs))], heights, width, bottom=1.0, label=strategy)
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_xticks([s + 0.4 - width / 2 for s in range(len(specs))], specs)
    axes.set_ylabel("geomean vs_default (D / R)")
    axes.set_title(title, fontsize="medium")
    axes.legend(fontsize="small")
    return png_bytes(figure, dpi=120)


def plot_curves(documents: list[dict[str, Any]]) -> bytes | None:
    """PNG: each policy's training curve (mean episode return vs steps); None without any."""
    curves = {document["policy"]: document["curve"] for document in documents if document.get("curve")}
    if not curves:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(7.0, 4.0))
    for label, curve in curves.items():
        axes.plot([point[0] for point in curve], [point[1] for point in curve], label=label)
    axes.set_xlabel("environment steps")
    axes.set_ylabel("mean episode return (R0 - R) / R0")
    axes.set_title("Training curves", fontsize="medium")
    axes.legend(fontsize="small")
    return png_bytes(figure, dpi=120)


@dataclass(frozen=True)
class WrittenReport:
    """What `write_report` wrote: report.md's text, and every file's path in the order written."""

    markdown: str
    files: tuple[str, ...]


def write_report(paths: list[str], directory: str, title: str) -> WrittenReport:
    """Load every result, policy directory and seed-scores file and write the report into `directory`
    (module docstring: report.md, and each figure there is something to draw)."""
    documents = load_results(paths)
    seed_runs = [runs for path in paths if (runs := load_seed_runs(path))]
    table = markdown(title, documents, seed_runs)
    figures: dict[str, bytes | None] = {
        "report.png": plot(title, documents) if documents else None,
        "training_curves.png": plot_curves(documents),
    }
    for spec, group in by_selection(seed_runs).items():
        figures[f"performance_profiles_{spec}.png"] = performance_profiles_figure(
            {run.label: run.matrix() for run in group}, f"{title}: {spec}"
        )
    os.makedirs(directory, exist_ok=True)
    written = []
    for name, data in {"report.md": table.encode(), **figures}.items():
        if data is not None:
            write_atomically(os.path.join(directory, name), data)
            written.append(os.path.join(directory, name))
    return WrittenReport(table, tuple(written))
