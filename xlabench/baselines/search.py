"""The committed search baselines (baselines/search/STRATEGY/BUDGET/SPLIT/results.json) as one table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from xlabench.eval.compare import load_result
from xlabench.eval.records import BELOW, Summary, figure, summarize

SEARCH_DIR = Path(__file__).resolve().parents[2] / "baselines" / "search"
STRATEGIES = ("replay", "local", "greedy", "beam", "random", "guided")
BUDGETS = (20, 200, 2000)
SPLITS = ("val", "test", "unseen")


@dataclass(frozen=True)
class SearchBaseline:
    """One stored run: a strategy at a budget (None for replay, which has none) on one split."""

    strategy: str
    budget: int | None
    split: str
    summary: Summary
    # From the stored summary: `eval --json` keeps the error line of such a graph, not the comparison.
    outputs_differ: int


def load_search_baselines(root: Path = SEARCH_DIR) -> list[SearchBaseline]:
    """Every stored run under `root`, in table order."""
    found = []
    for strategy in STRATEGIES:
        for budget in (None,) if strategy == "replay" else BUDGETS:
            for split in SPLITS:
                parts = [strategy, split] if budget is None else [strategy, str(budget), split]
                path = root.joinpath(*parts, "results.json")
                if path.is_file():
                    document = load_result(str(path))
                    differ = document.get("summary", {}).get("outputs_differ") or 0
                    found.append(
                        SearchBaseline(strategy, budget, split, summarize(document["graphs"]), differ)
                    )
    return found


def search_table(baselines: list[SearchBaseline]) -> str:
    """Markdown: a row per strategy and budget, geomean vs_default (graphs below BELOW) per split."""
    cells: dict[tuple[str, int | None], dict[str, str]] = {}
    split_sizes: dict[str, int] = {}
    for baseline in baselines:
        split_sizes[baseline.split] = max(split_sizes.get(baseline.split, 0), baseline.summary.graphs)
    for baseline in baselines:
        summary = baseline.summary
        text = f"{figure(summary.geomean_vs_default)} ({summary.below})"
        if summary.graphs < split_sizes[baseline.split]:  # a run from before the split grew
            text += f" of {summary.graphs} graphs"
        if baseline.outputs_differ:
            text += f", {baseline.outputs_differ} differ"
        cells.setdefault((baseline.strategy, baseline.budget), {})[baseline.split] = text
    lines = [
        "| strategy | calls a graph | " + " | ".join(SPLITS) + " |",
        "|---|---|" + "---|" * len(SPLITS),
    ]
    for (strategy, budget), by_split in cells.items():
        calls = "XLA's pipeline" if budget is None else f"{budget:,}"
        name = strategy if strategy == "replay" else f"search:{strategy}"
        lines.append(f"| {name} | {calls} | " + " | ".join(by_split.get(s, "-") for s in SPLITS) + " |")
    lines.append("")
    lines.append(
        f"Geomean vs_default = D / R (in brackets: graphs below {BELOW}); `differ`: graphs whose outputs "
        "are numerically worse than XLA's default's."
    )
    return "\n".join(lines)
