"""The headline metric of Ganai et al. 2023 ("Target-independent XLA optimization using Reinforcement
Learning") from committed results alone: no compiler call.

Per graph, ratio = (I - R) / (I - D) (I: the unoptimized module's op count, D: XLA's default pipeline's,
R: the strategy's), averaged (arithmetic mean) over the graphs with I > D; the paper reports 13.3%
over XLA's default on GPT-2 training graphs and 10.4% on GPT-2/BERT/ResNet. A ratio of 1 means R = D:
nothing beyond XLA. Graphs where I - D is a single op weigh as much as the largest, so the mean is also
given without them. Read from `baselines/search/STRATEGY/BUDGET/SPLIT/results.json` (and
`baselines/search/replay/SPLIT/`) and a shipped policy's stored baselines (`baselines/POLICY/`).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from xlabench.baselines.baseline_store import BaselineError, load
from xlabench.errors import UserInputError
from xlabench.graphs.suite_definition import SPLITS, suite

# What the paper reports over XLA's default phase ordering (its abstract: "improvement in operation
# count reduction"), per selection label.
PAPER_IMPROVEMENT = {"GPT-2 training": 0.133, "GPT-2/BERT/ResNet": 0.104}
GUIDED = "guided"
REPLAY = "replay"
DEFAULT_POLICY_NAME = "general"


@dataclass(frozen=True)
class GraphCounts:
    """One graph's op counts under one strategy: I, D, R, and the error that voids R (outputs differ)."""

    name: str
    family: str
    split: str | None
    input_ops: int
    default_ops: int
    result_ops: int
    error: str | None = None

    @property
    def qualifies(self) -> bool:
        """Whether the paper's metric is defined here: XLA's default removes ops (I > D)."""
        return self.input_ops > self.default_ops

    @property
    def one_op(self) -> bool:
        """Whether XLA's default removes exactly one op (I - D = 1): the ratio's steps are whole units."""
        return self.input_ops - self.default_ops == 1

    @property
    def ratio(self) -> float | None:
        """(I - R) / (I - D) where I > D, else None."""
        if not self.qualifies:
            return None
        return (self.input_ops - self.result_ops) / (self.input_ops - self.default_ops)


@dataclass(frozen=True)
class Selection:
    """A set of families the paper reports one number for."""

    label: str
    families: tuple[str, ...]


# Every gpt2 graph of the suite is a training step (loss, gradients, AdamW update: models/gpt2.py's
# make_program; its config has no inference mode).
SELECTIONS = (
    Selection("GPT-2 training", ("gpt2",)),
    Selection("GPT-2/BERT/ResNet", ("gpt2", "bert", "resnet")),
)


@dataclass(frozen=True)
class PaperMetric:
    """The paper's metric over some graphs, with what it rests on."""

    graphs: int  # with a valid result
    failed: int  # left out: the result's outputs differ from XLA's default's (R voided)
    qualifying: int  # I > D
    one_op: int  # of the qualifying: I - D = 1
    mean: float | None  # mean ratio over the qualifying graphs
    mean_without_one_op: float | None
    lowest: float | None
    highest: float | None
    at_default: int  # of the qualifying: R = D (ratio exactly 1)
    # Of the qualifying: R < D (ratio above 1), the only way the mean exceeds 1.
    below_default: int


@dataclass(frozen=True)
class StrategyResults:
    """What one strategy (or the per-graph best) achieved, graph by graph, on some splits."""

    label: str
    splits: tuple[str, ...]
    rows: tuple[GraphCounts, ...]


@dataclass(frozen=True)
class PaperRow:
    """One strategy's metric on one selection."""

    strategy: str
    splits: tuple[str, ...]
    selection: str
    metric: PaperMetric
    ratios: tuple[tuple[str, float], ...]  # (graph, ratio) of each qualifying graph


@dataclass(frozen=True)
class PaperTable:
    """Every strategy's metric on every selection, and where it came from."""

    root: str
    splits: tuple[str, ...]  # of the committed search results, holding the selections' families
    search_results: int  # results.json files the per-graph best is taken over
    rows: tuple[PaperRow, ...]


def _mean(values: list[float]) -> float | None:
    """Arithmetic mean, or None for no values."""
    return statistics.fmean(values) if values else None


def paper_metric(rows: Iterable[GraphCounts]) -> PaperMetric:
    """The paper's mean (I - R) / (I - D) over the rows with I > D; rows with an error are left out."""
    rows = list(rows)
    valid = [row for row in rows if row.error is None]
    qualifying = [row for row in valid if row.qualifies]
    ratios = [row.ratio for row in qualifying if row.ratio is not None]
    without = [row.ratio for row in qualifying if not row.one_op and row.ratio is not None]
    return PaperMetric(
        graphs=len(valid),
        failed=len(rows) - len(valid),
        qualifying=len(qualifying),
        one_op=sum(row.one_op for row in qualifying),
        mean=_mean(ratios),
        mean_without_one_op=_mean(without),
        lowest=min(ratios, default=None),
        highest=max(ratios, default=None),
        at_default=sum(row.result_ops == row.default_ops for row in qualifying),
        below_default=sum(row.result_ops < row.default_ops for row in qualifying),
    )


def select(rows: Iterable[GraphCounts], families: Sequence[str], splits: Sequence[str]) -> list[GraphCounts]:
    """The rows of the given families on the given splits."""
    return [row for row in rows if row.family in families and row.split in splits]


def best_rows(results: Iterable[Iterable[GraphCounts]]) -> list[GraphCounts]:
    """Per graph, the lowest R of every valid result; one that disagrees on I or D is an error."""
    best: dict[str, GraphCounts] = {}
    for rows in results:
        for row in rows:
            if row.error is not None:
                continue
            kept = best.get(row.name)
            if kept is not None and (kept.input_ops, kept.default_ops) != (row.input_ops, row.default_ops):
                raise UserInputError(
                    f"{row.name}: stored results disagree on I, D ({kept.input_ops}, {kept.default_ops} vs "
                    f"{row.input_ops}, {row.default_ops}): made from different graphs"
                )
            if kept is None or row.result_ops < kept.result_ops:
                best[row.name] = row
    return [best[name] for name in sorted(best)]


def _read_json(path: Path) -> Any:
    """A JSON file, or one clear error naming it."""
    try:
        return json.loads(path.read_text())
    except OSError as error:
        raise UserInputError(f"{path}: unreadable: {error.strerror or error}") from None
    except ValueError as error:
        raise UserInputError(f"{path}: not JSON ({error})") from None


def load_search_result(path: Path, split: str) -> list[GraphCounts]:
    """The rows of one `xlabench eval --json` file whose op counts were all measured."""
    try:
        return [
            GraphCounts(row["name"], row["family"], split, row["I"], row["D"], row["R"], row.get("error"))
            for row in _read_json(path)["graphs"]
            if None not in (row.get("I"), row.get("D"), row.get("R"))
        ]
    except (KeyError, TypeError) as error:
        raise UserInputError(f"{path}: not an `xlabench eval --json` result ({error!r})") from None


@dataclass(frozen=True)
class SearchResult:
    """One committed `results.json`: a strategy at a budget (None: replay) on one split."""

    strategy: str
    budget: int | None
    split: str
    rows: tuple[GraphCounts, ...]


def load_search_results(search_root: Path) -> list[SearchResult]:
    """Every committed results.json under `search_root` (STRATEGY/BUDGET/SPLIT or replay/SPLIT)."""
    found = []
    for path in sorted(search_root.glob("*/*/results.json")) + sorted(search_root.glob("*/*/*/results.json")):
        parts = path.relative_to(search_root).parts[:-1]
        if len(parts) == 2 and parts[0] == REPLAY:
            strategy, budget, split = REPLAY, None, parts[1]
        elif len(parts) == 3 and parts[1].isdigit() and parts[0] != REPLAY:
            strategy, budget, split = parts[0], int(parts[1]), parts[2]
        else:
            continue
        found.append(SearchResult(strategy, budget, split, tuple(load_search_result(path, split))))
    return found


def load_policy_rows(baselines_root: Path, policy_name: str) -> tuple[str, list[GraphCounts]]:
    """A policy's stored baselines (checksums verified) as rows, each with its graph's split; its label."""
    try:
        stored = load(policy_name, root=baselines_root)
    except BaselineError as error:
        raise UserInputError(str(error)) from None
    if stored is None:
        raise UserInputError(f"{baselines_root / policy_name}: no stored baselines (metadata.json)")
    splits = {spec.name: spec.split for spec in suite()}
    rows = []
    for name in stored.graph_names():
        entry = stored.get(name)
        if entry is None or None in (entry.input_ops, entry.default_ops, entry.policy_ops, entry.family):
            raise UserInputError(f"{stored.directory / (name + '.json')}: lacks I, D, R or family")
        assert entry.input_ops is not None and entry.default_ops is not None
        assert entry.policy_ops is not None and entry.family is not None
        rows.append(
            GraphCounts(
                name, entry.family, splits.get(name), entry.input_ops, entry.default_ops, entry.policy_ops
            )
        )
    return stored.policy, rows


def _ordered(splits: Iterable[str]) -> tuple[str, ...]:
    """Splits in the suite's order (train, val, test, unseen), any other name after them."""
    return tuple(
        sorted(splits, key=lambda split: (SPLITS.index(split) if split in SPLITS else len(SPLITS), split))
    )


def _budget_text(budget: int) -> str:
    """A budget as "2,000 calls"."""
    return f"{budget:,} calls"


def paper_table(baselines_root: Path, policy_name: str = DEFAULT_POLICY_NAME) -> PaperTable:
    """The paper's metric for XLA's order, the policy, guided search at each budget and the per-graph best,
    on every split with committed search results for the selections' families (plus the policy on every
    split it was stored for)."""
    search_root = baselines_root / "search"
    if not search_root.is_dir():
        raise UserInputError(f"{search_root}: no such directory (expected baselines/search/STRATEGY/...)")
    results = load_search_results(search_root)
    if not results:
        raise UserInputError(f"{search_root}: no search results (STRATEGY/BUDGET/SPLIT/results.json)")
    families = {family for selection in SELECTIONS for family in selection.families}
    present = {result.split for result in results if any(row.family in families for row in result.rows)}
    splits = _ordered(present)
    label, policy = load_policy_rows(baselines_root, policy_name)

    def on(rows: Iterable[GraphCounts], chosen: tuple[str, ...]) -> tuple[GraphCounts, ...]:
        """The rows on the chosen splits."""
        return tuple(row for row in rows if row.split in chosen)

    replay = [row for result in results if result.strategy == REPLAY for row in result.rows]
    strategies = [StrategyResults("XLA's order (replay)", splits, on(replay, splits))]
    strategies.append(StrategyResults(f"shipped policy ({label})", splits, on(policy, splits)))
    guided = sorted({result.budget for result in results if result.strategy == GUIDED and result.budget})
    for budget in guided:
        found = [row for r in results if r.strategy == GUIDED and r.budget == budget for row in r.rows]
        strategies.append(
            StrategyResults(f"search:guided, {_budget_text(budget)}", splits, on(found, splits))
        )
    best = best_rows([result.rows for result in results] + [policy])
    strategies.append(
        StrategyResults(
            f"best any search found (min R of {len(results)} results + the policy)", splits, on(best, splits)
        )
    )
    policy_splits = _ordered({row.split for row in policy if row.family in families and row.split})
    if policy_splits != splits:
        strategies.append(
            StrategyResults(f"shipped policy ({label})", policy_splits, on(policy, policy_splits))
        )
    rows = []
    for strategy in strategies:
        for selection in SELECTIONS:
            chosen = select(strategy.rows, selection.families, strategy.splits)
            ratios = tuple(
                (row.name, row.ratio) for row in chosen if row.error is None and row.ratio is not None
            )
            rows.append(
                PaperRow(strategy.label, strategy.splits, selection.label, paper_metric(chosen), ratios)
            )
    return PaperTable(str(baselines_root), splits, len(results), tuple(rows))


def _number(value: float | None) -> str:
    """A ratio with three decimals, or "-"."""
    return "-" if value is None else f"{value:.3f}"


def _improvement(value: float | None) -> str:
    """The mean as the paper's figure: improvement over XLA's default = mean - 1, in percent."""
    return "-" if value is None else f"{100 * (value - 1):+.1f}%"


def markdown(table: PaperTable) -> str:
    """A Markdown table per selection: a row per strategy."""
    header = (
        "| strategy | splits | graphs | I > D | I - D = 1 | R = D | R < D | mean (I-R)/(I-D) | vs XLA "
        "| without I - D = 1 | lowest-highest |"
    )
    lines = []
    for selection in SELECTIONS:
        lines += [f"### {selection.label} ({', '.join(selection.families)})", "", header, "|---" * 11 + "|"]
        for row in table.rows:
            if row.selection != selection.label:
                continue
            metric = row.metric
            graphs = f"{metric.graphs}" + (f" (+{metric.failed} outputs differ)" if metric.failed else "")
            cells = [
                row.strategy,
                ", ".join(row.splits),
                graphs,
                str(metric.qualifying),
                str(metric.one_op),
                str(metric.at_default),
                str(metric.below_default),
                _number(metric.mean),
                _improvement(metric.mean),
                _number(metric.mean_without_one_op),
                f"{_number(metric.lowest)}-{_number(metric.highest)}",
            ]
            lines.append("| " + " | ".join(cells) + " |")
        paper = PAPER_IMPROVEMENT[selection.label]
        lines += [
            "",
            f"Paper (Ganai et al. 2023): {100 * paper:+.1f}% over XLA's default phase ordering.",
            "",
        ]
    lines.append(
        "mean (I-R)/(I-D): over the graphs with I > D (1.000: R = D, nothing beyond XLA's default); "
        "vs XLA: mean - 1 (our reading of the paper's improvement); R = D, R < D: of the graphs with "
        "I > D. Graphs with I <= D (bf16 steps XLA's default grows) are left out; `without I - D = 1` "
        "also drops the graphs where XLA's default removes a single op. Search splits with these "
        f"families: {', '.join(table.splits)}."
    )
    return "\n".join(lines)


def to_json(table: PaperTable) -> dict[str, Any]:
    """The table as one JSON document: every row's metric and per-graph ratios."""
    return {
        "root": table.root,
        "splits": list(table.splits),
        "search_results": table.search_results,
        "paper_improvement": PAPER_IMPROVEMENT,
        "rows": [
            {
                "strategy": row.strategy,
                "splits": list(row.splits),
                "selection": row.selection,
                **asdict(row.metric),
                "ratios": dict(row.ratios),
            }
            for row in table.rows
        ],
    }
