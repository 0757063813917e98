"""The committed search baselines, read back as one table."""

from __future__ import annotations

import json

from xlabench.baselines.search import SEARCH_DIR, load_search_baselines, search_table
from xlabench.cli import main
from xlabench.eval.records import EvaluationRow, figure, summarize


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
