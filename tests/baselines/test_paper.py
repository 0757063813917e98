"""The paper's metric, mean (I - R) / (I - D) over graphs with I > D, on hand-built rows and on the
committed results (read from JSON only: no compiler call)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from xlabench.baselines.paper import (
    SELECTIONS,
    GraphCounts,
    best_rows,
    markdown,
    paper_metric,
    paper_table,
    select,
    to_json,
)
from xlabench.cli import main
from xlabench.errors import UserInputError
from xlabench.graphs.suite_definition import suite

ROOT = Path(__file__).resolve().parents[2]
BASELINES = ROOT / "baselines"


def counts(name, input_ops, default_ops, result_ops, family="gpt2", split="test", error=None):
    return GraphCounts(name, family, split, input_ops, default_ops, result_ops, error)


def test_the_metric_averages_over_graphs_where_xla_removes_ops():
    rows = [
        counts("a", 100, 80, 80),  # R = D: 1
        counts("b", 100, 80, 70),  # beyond XLA: 1.5
        counts("c", 100, 80, 100),  # left as it came: 0
        counts("d", 50, 70, 40),  # D > I (a bf16 step XLA grows): no ratio, left out
        counts("e", 50, 50, 45),  # I = D: left out
    ]
    metric = paper_metric(rows)
    assert [row.qualifies for row in rows] == [True, True, True, False, False]
    assert rows[3].ratio is None and rows[1].ratio == 1.5
    assert (metric.graphs, metric.qualifying, metric.one_op) == (5, 3, 0)
    assert metric.mean == pytest.approx((1 + 1.5 + 0) / 3)
    assert metric.mean_without_one_op == metric.mean
    assert (metric.lowest, metric.highest, metric.at_default, metric.below_default) == (0.0, 1.5, 1, 1)


def test_a_graph_xla_shrinks_by_one_op_is_flagged_and_can_be_left_out():
    rows = [counts("big", 1000, 800, 800), counts("tiny", 287, 286, 283)]
    metric = paper_metric(rows)
    assert [row.one_op for row in rows] == [False, True]
    assert rows[1].ratio == 4.0  # three ops fewer than XLA weigh as much as a whole large graph
    assert metric.one_op == 1 and metric.mean == pytest.approx(2.5)
    assert metric.mean_without_one_op == 1.0


def test_a_result_whose_outputs_differ_is_left_out_and_no_graphs_give_no_mean():
    metric = paper_metric([counts("a", 10, 5, 5), counts("b", 10, 5, 1, error="outputs differ")])
    assert (metric.graphs, metric.failed, metric.qualifying, metric.mean) == (1, 1, 1, 1.0)
    empty = paper_metric([counts("bf16", 5, 9, 9)])
    assert empty.qualifying == 0 and empty.mean is None and empty.mean_without_one_op is None


def test_selection_and_the_per_graph_best():
    rows = [
        counts("g", 10, 5, 5),
        counts("b", 10, 5, 5, family="bert", split="val"),
        counts("t", 10, 5, 5, family="t5"),
    ]
    assert [row.name for row in select(rows, ("gpt2", "bert"), ("test",))] == ["g"]
    first = [counts("g", 10, 5, 7), counts("h", 10, 5, 5)]
    second = [counts("g", 10, 5, 6), counts("h", 10, 5, 1, error="outputs differ")]
    assert [(row.name, row.result_ops) for row in best_rows([first, second])] == [("g", 6), ("h", 5)]
    with pytest.raises(UserInputError, match="disagree on I, D"):
        best_rows([first, [counts("g", 11, 5, 6)]])


def test_every_gpt2_graph_of_the_suite_is_a_training_step():
    gpt2 = [spec for spec in suite() if spec.family == "gpt2"]
    # models/gpt2.py's make_program (what GraphSpec.program builds) is the training step; no config
    # asks for another mode.
    assert gpt2 and all("mode" not in spec.config for spec in gpt2)


def test_the_table_on_the_committed_results(tmp_path, capsys):
    table = paper_table(BASELINES)
    # The splits: those of committed search results holding the selections' families.
    families = {family for selection in SELECTIONS for family in selection.families}
    replay = {
        path.parent.name: json.loads(path.read_text())["graphs"]
        for path in BASELINES.glob("search/replay/*/results.json")
    }
    expected = {
        path.parent.name
        for path in BASELINES.glob("search/**/results.json")
        if any(row["family"] in families for row in json.loads(path.read_text())["graphs"])
    }
    assert set(table.splits) == expected and table.splits
    guided = sorted(
        int(path.name) for path in (BASELINES / "search" / "guided").iterdir() if path.name.isdigit()
    )
    strategies = list(dict.fromkeys(row.strategy for row in table.rows))
    assert strategies[0] == "XLA's order (replay)" and strategies[1].startswith("shipped policy (general@")
    assert strategies[2 : 2 + len(guided)] == [f"search:guided, {budget:,} calls" for budget in guided]
    assert strategies[2 + len(guided)].startswith("best any search found")
    assert len(table.rows) % len(SELECTIONS) == 0
    for row in table.rows:
        metric = row.metric
        assert metric.qualifying > 0 and metric.mean is not None
        assert (
            metric.one_op <= metric.qualifying
            and metric.at_default + metric.below_default <= metric.qualifying
        )
        # (I - R) / (I - D) <= 1 on a graph exactly when R >= D: only a graph with R < D lifts it above 1.
        if metric.below_default == 0:
            assert metric.mean <= 1
        assert metric.lowest <= metric.mean <= metric.highest
    # XLA's order: the mean of the reduction ratios `xlabench eval` stored in the replay's results.json.
    for selection in SELECTIONS:
        stored = [
            row["reduction_ratio"]
            for split in table.splits
            for row in replay[split]
            if row["family"] in selection.families and row["reduction_ratio"] is not None
        ]
        [row] = [r for r in table.rows if r.strategy == strategies[0] and r.selection == selection.label]
        assert row.metric.qualifying == len(stored)
        assert row.metric.mean == pytest.approx(statistics.fmean(stored))
    # The command prints the same table and writes the same JSON.
    written = tmp_path / "paper.json"
    assert main(["baselines", "paper", "--root", str(BASELINES), "--json", str(written)]) == 0
    assert capsys.readouterr().out.strip() == markdown(table)
    assert json.loads(written.read_text()) == json.loads(json.dumps(to_json(table)))


def test_a_missing_directory_is_one_clear_error(tmp_path, capsys):
    assert main(["baselines", "paper", "--root", str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err == f"xlabench: error: {tmp_path / 'absent'}: no such directory (expected a baselines/ directory)"
    )
    assert main(["baselines", "paper", "--root", str(tmp_path)]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
