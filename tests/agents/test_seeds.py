"""Several seeds: parsed from the command line, judged with rliable's intervals, the best one shipped."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xlabench.agents.seeds import SeedScores, parse_seeds, probability_of_improvement, statistics
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
