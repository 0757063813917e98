"""Several seeds: parsed from the command line, judged with rliable's intervals, the best one shipped."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xlabench.agents.seeds import (
    NON_INFERIOR,
    NON_INFERIORITY_MARGIN,
    NOT_SHOWN,
    SUPERIOR,
    PairedComparison,
    SeedScores,
    best_seed,
    paired_comparison,
    parse_seeds,
    probability_of_improvement,
    statistics,
)
from xlabench.cli import main
from xlabench.errors import UserInputError


def test_seeds_are_ranges_and_lists_and_nonsense_is_one_error():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("3, 1,7-8,1") == [3, 1, 7, 8]
    for text in ("a", "4-2", "1,,2", "-1"):
        with pytest.raises(UserInputError, match="--seeds"):
            parse_seeds(text)


def test_intervals_say_whether_the_policy_beats_its_warm_start():
    rng = np.random.default_rng(0)
    warm = 1.0 + 0.002 * rng.standard_normal((5, 24))
    seeds = [SeedScores(seed, list(warm[seed] * 1.02), list(warm[seed])) for seed in range(5)]
    result = statistics(seeds, repetitions=200)
    assert result["policy_beats_warm_start"] and result["probability_of_improvement"]["low"] > 0.9
    geomean = result["policy"]["geomean"]
    assert geomean["low"] < geomean["estimate"] < geomean["high"]
    assert geomean["estimate"] == pytest.approx(np.exp(np.mean(np.log(warm * 1.02))))
    assert statistics(seeds, repetitions=200) == result  # seeded: the same scores, the same bounds
    same = [SeedScores(seed, list(warm[seed]), list(warm[seed])) for seed in range(5)]
    assert not statistics(same, repetitions=200)["policy_beats_warm_start"]


def test_the_seed_that_ships_is_the_best_whose_outputs_are_no_worse():
    worse = ["gru-train-bf16: output 28: error vs f32 reference rms 0.0226 (XLA's default 0.00306)"]
    seeds = [
        SeedScores(0, [1.00, 1.01], None),
        SeedScores(1, [1.02, 1.03], None, outputs_worse=worse),  # the best count, worse numerics
        SeedScores(2, [1.01, 1.01], None),
    ]
    assert best_seed(seeds).seed == 2
    assert SeedScores.from_json(seeds[1].to_json()).outputs_worse == worse
    assert best_seed([seeds[1]]) is None


def test_the_probability_of_improvement_is_rliables():
    from rliable import metrics

    rng = np.random.default_rng(1)
    # Rounded scores: ties between seeds, and a graph where both land on the same scores.
    better = np.round(1.0 + 0.01 * rng.standard_normal((5, 7)), 2)
    than = np.round(1.0 + 0.01 * rng.standard_normal((3, 7)), 2)
    than[:, 0] = better[:3, 0] = 1.0
    result = probability_of_improvement(better, than, repetitions=50)
    assert result["estimate"] == pytest.approx(metrics.probability_of_improvement(better, than))
    assert result["low"] <= result["estimate"] <= result["high"]


def _warm_scores(seeds: int, graphs: int, seed: int = 2) -> np.ndarray:
    """vs_default = D / R of warm starts: op counts R around D, one per (seed, graph)."""
    rng = np.random.default_rng(seed)
    default = rng.integers(200, 2000, size=graphs).astype(float)
    counts = np.round(default * (1 + 0.02 * rng.standard_normal((seeds, graphs))))
    return default / counts


def test_a_policy_that_never_moves_is_non_inferior_with_ties_counted_half():
    warm = _warm_scores(5, 15)
    result = paired_comparison(warm.copy(), warm, repetitions=500)
    assert (result.estimate, result.low, result.high) == (0.0, 0.0, 0.0)
    assert result.verdict == NON_INFERIOR and result.pairs == 75
    assert result.pairs_moved == result.pairs_improved == 0
    assert result.p_improvement_ties_half == 0.5  # rliable's convention: a tie is half a win
    assert result.p_improvement_no_ties is None  # no pair moved: undefined, stored as null
    stored = json.loads(json.dumps(result.to_json()))
    assert stored["p_improvement_no_ties"] is None and stored["verdict"] == NON_INFERIOR
    assert PairedComparison.from_json(stored) == result
    assert "(no ties)" in result.line() and "0 of 75 pairs moved" in result.line()


def test_a_small_improvement_on_every_pair_is_superior():
    warm = _warm_scores(5, 15)
    result = paired_comparison(warm * 1.001, warm, repetitions=500)
    assert result.verdict == SUPERIOR and 0 < result.low <= result.estimate <= result.high
    assert result.estimate == pytest.approx(np.log(1.001))
    assert result.pairs_moved == result.pairs_improved == result.pairs == 75
    assert result.p_improvement_ties_half == result.p_improvement_no_ties == 1.0


def test_moves_both_ways_that_cancel_are_non_inferior_and_count_ties_half():
    from rliable import metrics

    warm = _warm_scores(5, 15)
    # Per graph: three seeds a little better, one worse by as much as the three gain, one unmoved.
    log_ratio = np.array([0.0005, 0.0005, 0.0005, -0.0015, 0.0])[:, None] * np.ones((1, 15))
    policy = warm * np.exp(log_ratio)
    result = paired_comparison(policy, warm, repetitions=500)
    assert result.low < 0 < result.high and result.estimate == pytest.approx(0.0, abs=1e-12)
    assert result.low > -NON_INFERIORITY_MARGIN and result.verdict == NON_INFERIOR
    improved, moved = np.count_nonzero(log_ratio > 0), np.count_nonzero(log_ratio)
    assert (result.pairs_improved, result.pairs_moved) == (improved, moved)
    assert result.p_improvement_no_ties == pytest.approx(improved / moved)
    # Paired, each (seed, graph) is its own comparison: rliable's probability with one run per "task".
    as_tasks = metrics.probability_of_improvement(policy.reshape(1, -1), warm.reshape(1, -1))
    assert result.p_improvement_ties_half == pytest.approx(as_tasks)


def test_one_graph_much_worse_is_not_superior_though_the_mean_gains():
    warm = _warm_scores(5, 20)
    log_ratio = np.full((5, 20), 0.005)
    log_ratio[:, 7] = -0.05  # every seed loses 5% on one graph
    result = paired_comparison(warm * np.exp(log_ratio), warm, repetitions=2000)
    assert result.estimate == pytest.approx(log_ratio.mean()) and result.estimate > 0
    # Resampling graphs draws the bad one twice or more in a quarter of the resamples.
    assert result.low < 0 and result.verdict != SUPERIOR
    # The same loss on half the graphs: the interval excludes non-inferiority.
    many = np.where(np.arange(20) % 2 == 0, 0.005, -0.05) * np.ones((5, 1))
    assert paired_comparison(warm * np.exp(many), warm, 500).verdict == NOT_SHOWN


def test_the_paired_interval_is_reproducible_and_stored_in_the_seed_statistics():
    from xlabench.policies.artifact import seed_statistics_line

    rng = np.random.default_rng(3)
    warm = _warm_scores(5, 15)
    policy = warm * np.exp(0.003 * rng.standard_normal(warm.shape) * (rng.random(warm.shape) < 0.3))
    state = np.random.get_state()[1].copy()
    first = paired_comparison(policy, warm, repetitions=300)
    assert first == paired_comparison(policy, warm, repetitions=300)  # the same bounds, bit for bit
    assert first.low < first.estimate < first.high  # a real interval, not a degenerate one
    assert (np.random.get_state()[1] == state).all()  # numpy's global generator left as it was
    seeds = [SeedScores(seed, list(policy[seed]), list(warm[seed])) for seed in range(5)]
    result = statistics(seeds, repetitions=300)
    assert PairedComparison.from_json(result["policy_vs_warm_start"]) == first
    line = seed_statistics_line(json.loads(json.dumps(result)))  # as `describe` reads the metadata
    assert line.endswith("; " + first.line()) and f"{first.pairs_moved} of 75 pairs moved" in line
    del result["policy_vs_warm_start"]  # versions made before it was stored still print
    assert "paired" not in seed_statistics_line(result)
    assert "policy_vs_warm_start" not in statistics([SeedScores(0, [1.0, 1.1], None)], repetitions=50)


@pytest.mark.slow
def test_retrain_over_seeds_ships_the_best_on_the_selection_graphs(tmp_path, monkeypatch, small_graph):
    policies_root = tmp_path / "policies"
    monkeypatch.setenv("XLABENCH_POLICIES_DIR", str(policies_root))
    arguments = ["retrain", "--name", "tiny", "--graphs", small_graph, "--steps", "64", "--workers", "1",
                 "--seeds", "0-1", "--select-on", small_graph, "--eval-graphs", small_graph,
                 "--reward-baseline", "default", "--validate-every", "32"]  # fmt: skip
    assert main(arguments) == 0
    version = policies_root / "tiny" / "v1.0"
    metadata = json.loads((version / "metadata.json").read_text())
    assert metadata["selected_on"] == small_graph and metadata["environment"]["reward_baseline"] == "default"
    assert [seed["seed"] for seed in metadata["seeds"]] == [0, 1]
    best = max(metadata["seeds"], key=lambda seed: seed["geomean_vs_default"])
    assert metadata["seed"] == best["seed"]
    statistics_ = metadata["seed_statistics"]
    assert statistics_["seeds"] == [0, 1] and {"warm_start", "probability_of_improvement"} <= set(statistics_)
    # The greedy rollout on the selection graphs during training: from the warm start (before any update)
    # to the policy that ships, every 32 steps; its ends are the seed's two scores.
    for seed in metadata["seeds"]:
        steps, values = zip(*seed["validation_curve"], strict=True)
        assert steps[0] == 0 and list(steps[:3]) == [0, 32, 64] and steps == tuple(sorted(steps))
        assert values[0] == pytest.approx(seed["warm_start_geomean_vs_default"], abs=1e-6)
        assert values[-1] == pytest.approx(seed["geomean_vs_default"], abs=1e-6)
    shipped = metadata["training"]["validation_curve"]
    assert [step for step, _ in shipped] == [step for step, _ in best["validation_curve"]]
    assert [value for _, value in shipped] == pytest.approx([value for _, value in best["validation_curve"]])
    assert (version / "training_curves.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_retrain_writes_nothing_when_every_seed_is_numerically_worse(
    tmp_path, monkeypatch, capsys, small_graph
):
    from xlabench.eval import evaluate
    from xlabench.xla.driver.execution import OutputsVerdict

    # As if every seed's executable computed output 0 less accurately than XLA's default executable.
    worse = OutputsVerdict(["output 0 (f32[8]): 3 of 8 elements differ, largest difference 0.5"], "test")
    monkeypatch.setattr(evaluate, "judge_outputs", lambda *arguments: worse)
    monkeypatch.setenv("XLABENCH_POLICIES_DIR", str(tmp_path / "policies"))
    scores = tmp_path / "scores.json"
    arguments = ["retrain", "--name", "tiny", "--graphs", small_graph, "--steps", "0", "--workers", "1",
                 "--seeds", "0-1", "--select-on", small_graph, "--eval-graphs", "",
                 "--seed-scores", str(scores)]  # fmt: skip
    assert main(arguments) == 1
    # The seeds' figures are kept for the comparison's report even though no version is written.
    document = json.loads(scores.read_text())
    assert document["shipped_seed"] is None and [seed["seed"] for seed in document["seeds"]] == [0, 1]
    assert all("3 of 8 elements differ" in seed["outputs_worse"][0] for seed in document["seeds"])
    assert [line.split(":")[0] for line in document["not_written"]] == ["seed 0", "seed 1"]
    captured = capsys.readouterr()
    assert "seed 1 on" in captured.out and "outputs worse than the default's on 1 graph(s)" in captured.out
    assert "seed 0: " in captured.err and "3 of 8 elements differ" in captured.err
    assert "tiny not written: every seed's outputs are numerically worse" in captured.err
    assert not (tmp_path / "policies" / "tiny").exists()
