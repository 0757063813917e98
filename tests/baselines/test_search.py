"""The committed search baselines, read back as one table."""

from __future__ import annotations

import json

import pytest

from xlabench.baselines.baseline_store import write
from xlabench.baselines.search import (
    GUIDED_SHARE_GOAL,
    SEARCH_DIR,
    CapturedShare,
    captured_share,
    captured_shares,
    load_search_baselines,
    search_table,
)
from xlabench.cli import main
from xlabench.eval.evaluation_records import EvaluationRow, figure, summarize


def test_the_table_has_a_row_per_stored_strategy_and_budget_with_its_geomean():
    baselines = load_search_baselines()
    stored = json.loads((SEARCH_DIR / "replay" / "val" / "results.json").read_text())["graphs"]
    geomean = summarize([EvaluationRow.from_json(row) for row in stored]).geomean_vs_default
    table = search_table(baselines)
    assert f"| replay | XLA's pipeline | {figure(geomean)} (" in table
    rows = {tuple(line.split(" | ")[:2]) for line in table.splitlines() if line.startswith("| search:")}
    assert len(rows) == len({(b.strategy, b.budget) for b in baselines if b.strategy != "replay"})


def test_a_directory_without_baselines_is_one_clear_error(tmp_path, capsys):
    assert main(["baselines", "search", "--root", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err.endswith("no search baselines (STRATEGY/BUDGET/SPLIT/results.json)")
        and len(err.splitlines()) == 1
    )


def _result(path, rows):
    path.mkdir(parents=True)
    graphs = [{"name": n, "family": "gpt2", "I": i, "D": d, "R": r, **extra} for n, i, d, r, extra in rows]
    document = {"policy": f"search:{path.parts[-3]}", "graphs_spec": path.name, "graphs": graphs}
    (path / "results.json").write_text(json.dumps(document))


def test_guided_search_is_judged_by_the_share_of_the_best_known_improvement_it_captures(tmp_path, capsys):
    # D 100 on a and b, 50 on c. Local search at 2,000 calls found a 90 (10 below D); the policy b 80 (20);
    # nobody improved c. Guided at 200 on test reaches a 95 and b 82: 5 + 18 of 30 captured.
    names = ("gpt2-a", "gpt2-b", "gpt2-c")
    _result(tmp_path / "search" / "local" / "2000" / "test", [(n, 120, d, r, {}) for n, d, r in
            zip(names, (100, 100, 50), (90, 100, 50), strict=True)])  # fmt: skip
    _result(tmp_path / "search" / "guided" / "200" / "test", [(n, 120, d, r, {}) for n, d, r in
            zip(names, (100, 100, 50), (95, 82, 50), strict=True)])  # fmt: skip
    # A sequence whose outputs differ captures nothing, however low its count.
    _result(tmp_path / "search" / "guided" / "200" / "unseen",
            [("gpt2-a", 120, 100, 60, {"error": "outputs differ from XLA's default"})])  # fmt: skip
    policy = [EvaluationRow(n, "gpt2", 120, d, r, sequence=["cse"]) for n, d, r in
              zip(names, (100, 100, 50), (100, 80, 50), strict=True)]  # fmt: skip
    write("general", "general@v9.0", "0.10.2", policy, root=tmp_path)
    shares = {(s.strategy, s.budget, s.split): s for s in captured_shares(tmp_path)}
    guided = shares["guided", 200, "test"]
    assert guided.judged and not shares["local", 2000, "test"].judged
    assert (guided.share.improvable, guided.share.excluded) == (2, 1)
    assert guided.share.share == pytest.approx(23 / 30) and not guided.share.meets_goal
    assert shares["local", 2000, "test"].share.share == pytest.approx(10 / 30)
    # R 60 with differing outputs: counted as D, it captures none of the 10 ops known below D on a.
    assert shares["guided", 200, "unseen"].share.share == 0.0
    assert main(["baselines", "search", "--root", str(tmp_path / "search")]) == 0
    out = capsys.readouterr().out
    assert "| search:guided | 200 | test | 3 | 2 | 76.7% | 70.0% | >= 90%: not met |" in out


def test_the_captured_share_pools_graphs_with_a_known_improvement():
    default = {"a": 100, "b": 100, "c": 100, "d": 100}
    best = {"a": 90, "b": 80, "c": 100, "d": 95}  # c: nothing below XLA's default known
    strategy = {"a": 90, "b": 90, "c": 100, "d": 101}  # all of a's gain, half of b's, d worse
    share = captured_share(strategy, default, best)
    assert (share.graphs, share.improvable, share.excluded) == (4, 3, 1)
    assert share.share == pytest.approx((10 + 10 + 0) / (10 + 20 + 5))
    assert share.per_graph_mean == pytest.approx((1 + 0.5 + 0) / 3)
    assert share.worse_than_default == 1 and share.new_best == 0
    assert not share.meets_goal and share.goal == GUIDED_SHARE_GOAL
    assert CapturedShare.from_json(json.loads(json.dumps(share.to_json()))) == share


def test_the_captured_share_goal_and_its_edges():
    default = {"a": 100, "b": 200}
    best = {"a": 90, "b": 180}
    assert captured_share(best, default, best).share == 1.0 and captured_share(best, default, best).meets_goal
    at_goal = captured_share({"a": 91, "b": 182}, default, best)  # 9 of 10 and 18 of 20
    assert at_goal.share == pytest.approx(GUIDED_SHARE_GOAL) and at_goal.meets_goal
    assert not captured_share({"a": 92, "b": 182}, default, best).meets_goal
    # Below the best known: the strategy's own count is the best known, and a graph becomes improvable.
    beyond = captured_share({"a": 85, "b": 200}, {"a": 100, "b": 200}, {"a": 90, "b": 200})
    assert (beyond.new_best, beyond.improvable, beyond.share) == (1, 1, 1.0)
    nothing = captured_share({"a": 100}, {"a": 100}, {"a": 100})
    assert nothing.share is None and nothing.per_graph_mean is None and not nothing.meets_goal
    assert nothing.excluded == 1
    with pytest.raises(ValueError, match="different graphs"):
        captured_share({"a": 90}, default, best)
