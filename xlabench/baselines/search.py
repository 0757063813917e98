"""The committed search baselines (baselines/search/STRATEGY/BUDGET/SPLIT/results.json) as one table."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from xlabench.baselines.paper import (
    DEFAULT_POLICY_NAME,
    GUIDED,
    REPLAY,
    best_rows,
    load_policy_rows,
    load_search_results,
)
from xlabench.eval.comparison_report import load_result
from xlabench.eval.evaluation_records import BELOW, Summary, figure, summarize

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


# A search strategy's goal: the share of the best-known improvement over XLA's default it captures.
GUIDED_SHARE_GOAL = 0.90


@dataclass(frozen=True)
class CapturedShare:
    """How much of the best-known improvement over XLA's default a search strategy captures at a budget.

    Over the graphs where some op count below XLA's default D is known (`improvable`), `share` is
    sum max(0, D - R_strategy) / sum (D - R_best); `per_graph_mean` the mean over those graphs of
    max(0, D - R_strategy) / (D - R_best). Graphs with no known improvement are left out (`excluded`).
    Both are None when no graph is improvable. The strategy's own count is known, so R_best is at most
    R_strategy (`new_best`: graphs where the given best-known count was above the strategy's)."""

    graphs: int
    improvable: int
    excluded: int
    captured: float  # sum over improvable graphs of max(0, D - R_strategy)
    available: float  # sum over improvable graphs of D - R_best
    share: float | None
    per_graph_mean: float | None
    new_best: int
    worse_than_default: int  # graphs where the strategy's count is above D (they count 0, not less)
    goal: float = GUIDED_SHARE_GOAL

    @property
    def meets_goal(self) -> bool:
        """The pooled share reaches the goal; False when there was nothing to capture."""
        return self.share is not None and self.share >= self.goal

    def to_json(self) -> dict[str, Any]:
        """The fields, and whether the goal is met."""
        return {**asdict(self), "meets_goal": self.meets_goal}

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> CapturedShare:
        """The entry as `to_json` wrote it (`meets_goal` is recomputed)."""
        share, mean = entry["share"], entry["per_graph_mean"]
        return cls(
            graphs=int(entry["graphs"]),
            improvable=int(entry["improvable"]),
            excluded=int(entry["excluded"]),
            captured=float(entry["captured"]),
            available=float(entry["available"]),
            share=None if share is None else float(share),
            per_graph_mean=None if mean is None else float(mean),
            new_best=int(entry["new_best"]),
            worse_than_default=int(entry["worse_than_default"]),
            goal=float(entry.get("goal", GUIDED_SHARE_GOAL)),
        )


def captured_share(
    strategy: Mapping[str, float],
    default: Mapping[str, float],
    best_known: Mapping[str, float],
    goal: float = GUIDED_SHARE_GOAL,
) -> CapturedShare:
    """The share of the best-known improvement a strategy captures; each mapping is graph -> op count
    (the strategy's R at its budget, XLA's default D, the best-known R), over the same graphs."""
    names = set(default)
    if set(strategy) != names or set(best_known) != names:
        differ = sorted(names.symmetric_difference(strategy) | names.symmetric_difference(best_known))
        raise ValueError(f"captured share: the counts cover different graphs ({', '.join(differ)})")
    captured = available = 0.0
    shares: list[float] = []
    new_best = worse = 0
    for name in sorted(names):
        ours, xla, best = float(strategy[name]), float(default[name]), float(best_known[name])
        if ours < best:
            new_best += 1
            best = ours
        worse += ours > xla
        if best >= xla:
            continue  # no known improvement on this graph
        gain = max(0.0, xla - ours)
        captured += gain
        available += xla - best
        shares.append(gain / (xla - best))
    return CapturedShare(
        graphs=len(names),
        improvable=len(shares),
        excluded=len(names) - len(shares),
        captured=captured,
        available=available,
        share=captured / available if shares else None,
        per_graph_mean=math.fsum(shares) / len(shares) if shares else None,
        new_best=new_best,
        worse_than_default=worse,
        goal=goal,
    )


# search:guided is judged at this budget or below on these splits (issue 57): the share of the best-known
# improvement it captures, not an absolute geomean that no search reaches on `unseen`.
GUIDED_BUDGET = 200
GUIDED_SPLITS = ("test", "unseen")


@dataclass(frozen=True)
class StrategyShare:
    """One stored search result's share of the best-known improvement over XLA's default."""

    strategy: str
    budget: int | None
    split: str
    share: CapturedShare

    @property
    def judged(self) -> bool:
        """Whether the goal applies: search:guided at most `GUIDED_BUDGET` calls on `GUIDED_SPLITS`."""
        return (
            self.strategy == GUIDED
            and self.budget is not None
            and self.budget <= GUIDED_BUDGET
            and self.split in GUIDED_SPLITS
        )


def captured_shares(baselines_root: Path, policy_name: str = DEFAULT_POLICY_NAME) -> list[StrategyShare]:
    """Per stored search result, the share of the best-known improvement it captures (`captured_share`).

    Best-known: per graph, the lowest R of every stored search result and of the shipped policy's stored
    baselines. A graph whose outputs differed counts as XLA's default (a numerically worse sequence is no
    win)."""
    results = load_search_results(baselines_root / "search")
    _, policy = load_policy_rows(baselines_root, policy_name)
    best = {row.name: row.result_ops for row in best_rows([result.rows for result in results] + [policy])}
    shares = []
    for result in results:
        if result.strategy == REPLAY:
            continue
        default = {row.name: row.default_ops for row in result.rows}
        ours = {row.name: row.default_ops if row.error else row.result_ops for row in result.rows}
        known = {name: best.get(name, ours[name]) for name in default}
        shares.append(
            StrategyShare(result.strategy, result.budget, result.split, captured_share(ours, default, known))
        )
    return shares


def shares_table(shares: list[StrategyShare]) -> str:
    """Markdown: per strategy, budget and split, the share of the best-known improvement captured."""
    lines = [
        "| strategy | calls a graph | split | graphs | with a known improvement | share (pooled) "
        "| mean per graph | goal |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for entry in sorted(
        shares,
        key=lambda e: (STRATEGIES.index(e.strategy) if e.strategy in STRATEGIES else 99, e.budget or 0,
                       SPLITS.index(e.split) if e.split in SPLITS else 99),
    ):  # fmt: skip
        share = entry.share
        pooled = "-" if share.share is None else f"{share.share:.1%}"
        mean = "-" if share.per_graph_mean is None else f"{share.per_graph_mean:.1%}"
        goal = ""
        if entry.judged:
            goal = f">= {share.goal:.0%}: " + ("met" if share.meets_goal else "not met")
        lines.append(
            f"| search:{entry.strategy} | {entry.budget:,} | {entry.split} | {share.graphs} "
            f"| {share.improvable} | {pooled} | {mean} | {goal} |"
        )
    lines.append("")
    lines.append(
        "Share: sum over graphs of max(0, D - R) / sum of (D - R_best), R_best the lowest count any stored "
        "result or the shipped policy reached; graphs with no known improvement are left out."
    )
    return "\n".join(lines)
