"""Several seeds of one training configuration: each judged on a selection split, with statistics over
seeds and graphs from rliable (Agarwal et al. 2021), and the best seed chosen to ship.

One seed is one sample. For each seed both the policy after PPO and its warm start (the clone before
any PPO update) roll out on every selection graph; the score of a (seed, graph) pair is `vs_default`.
rliable's stratified bootstrap (over seeds within each graph, and over graphs) gives 95% confidence
intervals of the geomean, mean and IQM of each, and of the probability that PPO improves on its warm
start on a graph. The learning curves of the seeds go into one figure, mean and 95% interval.

PPO against its own warm start is judged paired (`paired_comparison`): per (seed, graph) the log-ratio
log(vs_policy / vs_warm_start) = log(R_warm_start / R_policy), its mean over pairs with a 95% interval from
the same stratified bootstrap, and a verdict against a non-inferiority margin.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xlabench.errors import UserInputError
from xlabench.files import png_bytes

BOOTSTRAP_REPETITIONS = 2000
BOOTSTRAP_SEED = 0  # the intervals are reproducible: the same scores give the same bounds
CURVE_GRID = 50
# `retrain --seed-scores FILE`: the seeds' scores and statistics, written whether or not a seed ships.
SEED_SCORES_FORMAT = "xlabench-seed-scores/1"
# The paired judgement of a policy against its warm start (`paired_comparison`): the lower bound of the
# mean log-ratio log(R_warm_start / R_policy) above 0 is "superior", above -margin "non-inferior" (a loss
# of at most ~0.2% of the op count is excluded), else neither is shown.
NON_INFERIORITY_MARGIN = 0.002
SUPERIOR = "superior"
NON_INFERIOR = "non-inferior"
NOT_SHOWN = "inferior or undecided"


def parse_seeds(text: str) -> list[int]:
    """Seeds from "0-4" or "0,2,5" (or both: "0-2,7"); one clear error for anything else."""
    seeds: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if match is None:
            raise UserInputError(f"--seeds {text!r}: expected seeds such as 0-4 or 0,2,5")
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if last < first:
            raise UserInputError(f"--seeds {text!r}: {first}-{last} is an empty range")
        seeds += [seed for seed in range(first, last + 1) if seed not in seeds]
    return seeds


@dataclass
class SeedScores:
    """One seed on the selection graphs: `vs_default` per graph of its policy and of its warm start."""

    seed: int
    policy: list[float]
    warm_start: list[float] | None
    curve: list[tuple[int, float]] = field(default_factory=list)
    graphs: list[str] = field(default_factory=list)  # the selection graphs, in the order of the scores
    # The greedy rollout's geomean vs_default on held-out graphs during training (`Validation`).
    validation_curve: list[tuple[int, float]] = field(default_factory=list)
    # One line per selection graph where the policy's outputs are numerically worse than XLA's default's.
    outputs_worse: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The seed's entry in a policy's metadata (`seeds`): geomeans, per-graph scores, curve."""
        return {
            "seed": self.seed,
            "geomean_vs_default": self.geomean(),
            "warm_start_geomean_vs_default": self.geomean("warm_start") if self.warm_start else None,
            "graphs": self.graphs,
            "vs_default": self.policy,
            "warm_start_vs_default": self.warm_start,
            "curve": self.curve,
            "validation_curve": self.validation_curve,
            "outputs_worse": self.outputs_worse,
        }

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> SeedScores:
        """A seed's entry as `to_json` wrote it (versions before per-graph scores have none: KeyError)."""
        return cls(
            seed=int(entry["seed"]),
            policy=[float(value) for value in entry["vs_default"]],
            warm_start=entry.get("warm_start_vs_default"),
            curve=[tuple(point) for point in entry.get("curve", [])],
            graphs=list(entry["graphs"]),
            validation_curve=[tuple(point) for point in entry.get("validation_curve", [])],
            outputs_worse=list(entry.get("outputs_worse", [])),
        )

    def geomean(self, which: str = "policy") -> float:
        """Geomean `vs_default` of the policy (or the warm start) over the selection graphs."""
        values = self.policy if which == "policy" else self.warm_start
        return float(np.exp(np.mean(np.log(values)))) if values else float("nan")


def best_seed(seeds: list[SeedScores]) -> SeedScores | None:
    """The seed that ships: the best geomean among those whose outputs are no worse than XLA's default's
    on every selection graph (a numerically worse sequence is no win); None when no seed is."""
    eligible = [seed for seed in seeds if not seed.outputs_worse]
    return max(eligible, key=SeedScores.geomean) if eligible else None


@contextlib.contextmanager
def _seeded() -> Iterator[None]:
    """numpy's global generator seeded, then restored: rliable's stratified bootstrap draws its indices
    from it (`StratifiedBootstrap.update_indices`), whatever `random_state` says."""
    state = np.random.get_state()
    np.random.seed(BOOTSTRAP_SEED)
    try:
        yield
    finally:
        np.random.set_state(state)


def _interval_estimates(
    scores: dict[str, Any], function: Any, repetitions: int = BOOTSTRAP_REPETITIONS
) -> tuple[dict[str, Any], dict[str, Any]]:
    """rliable's point estimates and 95% intervals, reproducibly."""
    from rliable import library

    with _seeded():
        return library.get_interval_estimates(scores, function, task_bootstrap=True, reps=repetitions)


def _aggregates(scores: np.ndarray) -> np.ndarray:
    """Geomean, mean and IQM of a (seeds x graphs) matrix of `vs_default`."""
    from rliable import metrics

    return np.array(
        [np.exp(np.mean(np.log(scores))), metrics.aggregate_mean(scores), metrics.aggregate_iqm(scores)]
    )


def statistics(seeds: list[SeedScores], repetitions: int = BOOTSTRAP_REPETITIONS) -> dict[str, Any]:
    """Point estimates and 95% stratified-bootstrap intervals over seeds and graphs (rliable)."""
    matrices = {"policy": np.array([seed.policy for seed in seeds])}
    if all(seed.warm_start is not None for seed in seeds):
        matrices["warm_start"] = np.array([seed.warm_start for seed in seeds])
    points, intervals = _interval_estimates(matrices, _aggregates, repetitions)
    result: dict[str, Any] = {
        "seeds": [seed.seed for seed in seeds],
        "graphs": int(matrices["policy"].shape[1]),
        "confidence": 0.95,
        "bootstrap": f"rliable, stratified over seeds and graphs, {repetitions} repetitions",
    }
    for name, point in points.items():
        interval = intervals[name]
        result[name] = {
            aggregate: {
                "estimate": float(point[i]),
                "low": float(interval[0][i]),
                "high": float(interval[1][i]),
            }
            for i, aggregate in enumerate(("geomean", "mean", "iqm"))
        }
    if "warm_start" in matrices:
        result["probability_of_improvement"] = probability_of_improvement(
            matrices["policy"], matrices["warm_start"], repetitions
        )
        low_policy, high_warm = result["policy"]["geomean"]["low"], result["warm_start"]["geomean"]["high"]
        result["policy_beats_warm_start"] = bool(low_policy > high_warm)  # intervals apart
        # Paired on the same (seed, graph): sharper than the two intervals above, which ignore the pairing.
        comparison = paired_comparison(matrices["policy"], matrices["warm_start"], repetitions)
        result["policy_vs_warm_start"] = comparison.to_json()
    return result


def probability_of_improvement(
    better: np.ndarray, than: np.ndarray, repetitions: int = BOOTSTRAP_REPETITIONS
) -> dict[str, float]:
    """P(a seed of `better` scores above a seed of `than` on a graph), averaged over graphs, with its
    95% interval: rliable's probability of improvement on two (seeds x graphs) matrices."""
    point, interval = _interval_estimates({"pair": (better, than)}, _improvement_probability, repetitions)
    return {
        "estimate": float(point["pair"]),
        "low": float(interval["pair"][0][0]),
        "high": float(interval["pair"][1][0]),
    }


def _improvement_probability(x: np.ndarray, y: np.ndarray) -> float:
    """rliable's `metrics.probability_of_improvement`, vectorized: per graph, the Mann-Whitney U of
    x's seeds over y's divided by the pairs (ties count half), averaged over graphs. rliable calls
    scipy once per graph, which dominated the bootstrap's time."""
    pairs = x[:, None, :] - y[None, :, :]
    return float(np.mean((pairs > 0) + 0.5 * (pairs == 0)))


@dataclass(frozen=True)
class PairedComparison:
    """A policy against its warm start, paired on the same (seed, graph): d = log(vs_policy /
    vs_warm_start) = log(R_warm_start / R_policy), positive where the policy's op count is lower.

    `estimate` is the mean of d over the pairs; `low`, `high` its 95% percentile interval from rliable's
    stratified bootstrap (graphs resampled, and seeds within each graph: the same as `statistics`).
    The probabilities of improvement are over pairs: with ties counted half (rliable's convention, so
    identical scores give 0.5), and without ties (the share of strictly better among the pairs that
    moved; None when no pair moved)."""

    estimate: float
    low: float
    high: float
    pairs: int  # (seed, graph) pairs
    pairs_moved: int  # pairs where the policy's op count differs from its warm start's
    pairs_improved: int  # pairs where it is lower
    p_improvement_ties_half: float
    p_improvement_no_ties: float | None
    repetitions: int = BOOTSTRAP_REPETITIONS
    confidence: float = 0.95
    margin: float = NON_INFERIORITY_MARGIN

    @property
    def verdict(self) -> str:
        """SUPERIOR when the interval's lower bound is above 0, NON_INFERIOR when above -margin, else
        NOT_SHOWN (the interval does not exclude a loss larger than the margin)."""
        if self.low > 0:
            return SUPERIOR
        return NON_INFERIOR if self.low > -self.margin else NOT_SHOWN

    def to_json(self) -> dict[str, Any]:
        """Its entry in a policy's `seed_statistics` (`policy_vs_warm_start`): estimate, low, high as the
        other statistics there, and the verdict as it was judged."""
        return {
            "statistic": "mean over (seed, graph) of log(vs_policy / vs_warm_start)",
            "estimate": self.estimate,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "bootstrap": f"rliable, stratified over seeds and graphs, paired, {self.repetitions} repetitions",
            "repetitions": self.repetitions,
            "margin": self.margin,
            "verdict": self.verdict,
            "pairs": self.pairs,
            "pairs_moved": self.pairs_moved,
            "pairs_improved": self.pairs_improved,
            "p_improvement_ties_half": self.p_improvement_ties_half,
            "p_improvement_no_ties": self.p_improvement_no_ties,
            # As printed: the policies package reads the metadata without importing this one.
            "line": self.line(),
        }

    @classmethod
    def from_json(cls, entry: dict[str, Any]) -> PairedComparison:
        """The entry as `to_json` wrote it (its verdict is recomputed from low and margin)."""
        no_ties = entry["p_improvement_no_ties"]
        return cls(
            estimate=float(entry["estimate"]),
            low=float(entry["low"]),
            high=float(entry["high"]),
            pairs=int(entry["pairs"]),
            pairs_moved=int(entry["pairs_moved"]),
            pairs_improved=int(entry["pairs_improved"]),
            p_improvement_ties_half=float(entry["p_improvement_ties_half"]),
            p_improvement_no_ties=None if no_ties is None else float(no_ties),
            repetitions=int(entry.get("repetitions", BOOTSTRAP_REPETITIONS)),
            confidence=float(entry.get("confidence", 0.95)),
            margin=float(entry.get("margin", NON_INFERIORITY_MARGIN)),
        )

    def line(self) -> str:
        """One clause for `seed_statistics_line`."""
        no_ties = "-" if self.p_improvement_no_ties is None else f"{self.p_improvement_no_ties:.2f}"
        return (
            f"policy vs warm start, paired: mean log-ratio {self.estimate:+.4f} "
            f"[{self.confidence:.0%} {self.low:+.4f}, {self.high:+.4f}], {self.verdict}; "
            f"P(improve) {self.p_improvement_ties_half:.2f} (ties half), {no_ties} (no ties), "
            f"{self.pairs_moved} of {self.pairs} pairs moved"
        )


def paired_comparison(
    policy: np.ndarray, warm_start: np.ndarray, repetitions: int = BOOTSTRAP_REPETITIONS
) -> PairedComparison:
    """The policy against its warm start on the same (seeds x graphs) pairs of `vs_default`: row i of
    both is seed i, column j graph j. Reproducible: the same scores give the same interval."""
    policy, warm_start = np.asarray(policy, dtype=float), np.asarray(warm_start, dtype=float)
    if policy.shape != warm_start.shape or policy.ndim != 2:
        raise ValueError(
            f"paired scores need one (seeds x graphs) shape, not {policy.shape} and {warm_start.shape}"
        )
    # Equal op counts give bit-equal vs_default = D / R, so an unmoved pair is exactly 0.
    log_ratio = np.log(policy) - np.log(warm_start)
    point, interval = _interval_estimates({"d": log_ratio}, np.mean, repetitions)
    moved = int(np.count_nonzero(log_ratio))
    improved = int(np.count_nonzero(log_ratio > 0))
    return PairedComparison(
        estimate=float(point["d"]),
        low=float(np.ravel(interval["d"][0])[0]),
        high=float(np.ravel(interval["d"][1])[0]),
        pairs=int(log_ratio.size),
        pairs_moved=moved,
        pairs_improved=improved,
        p_improvement_ties_half=(improved + 0.5 * (log_ratio.size - moved)) / log_ratio.size,
        p_improvement_no_ties=improved / moved if moved else None,
        repetitions=repetitions,
    )


def performance_profiles_figure(runs: dict[str, np.ndarray], title: str) -> bytes:
    """PNG: rliable's performance profiles, the share of (seed, graph) scores above each vs_default."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from rliable import library, plot_utils

    low = min(float(matrix.min()) for matrix in runs.values())
    high = max(float(matrix.max()) for matrix in runs.values())
    taus = np.linspace(low - 1e-3, high + 1e-3, 101)
    with _seeded():
        profiles, intervals = library.create_performance_profile(runs, taus, reps=BOOTSTRAP_REPETITIONS)
    colors = dict(zip(runs, plt.get_cmap("tab10").colors, strict=False))
    figure, axes = plt.subplots(figsize=(7, 4))
    plot_utils.plot_performance_profiles(
        profiles, taus, performance_profile_cis=intervals, colors=colors, xlabel=r"vs_default $\tau$", ax=axes
    )
    axes.axvline(1.0, color="black", linewidth=0.8)
    axes.set_title(title, fontsize="medium")
    handles = [Line2D([0], [0], color=color, label=label) for label, color in colors.items()]
    axes.legend(handles=handles, fontsize="small")
    return png_bytes(figure, dpi=100)


def curves_figure(seeds: list[SeedScores], title: str) -> bytes:
    """PNG: each seed's learning curve brought to one grid of steps, their mean and 95% interval; beside
    it, where the seeds have one, the same for the greedy rollout on held-out graphs (`validation_curve`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    validated = any(len(seed.validation_curve) >= 2 for seed in seeds)
    columns = 2 if validated else 1
    figure, panels = plt.subplots(1, columns, figsize=(6 * columns + 1, 4), squeeze=False)
    _draw_curves(panels[0][0], seeds, "curve", "mean episode return")
    if validated:
        _draw_curves(panels[0][1], seeds, "validation_curve", "greedy rollout: geomean vs_default")
        panels[0][1].set_title("held-out graphs", fontsize="medium")
    panels[0][0].set_title(title, fontsize="medium")
    return png_bytes(figure, dpi=100)


def _draw_curves(axes: Any, seeds: list[SeedScores], which: str, label: str) -> None:
    """One panel of `curves_figure`: the seeds' curves `which` on one grid, mean and 95% interval."""
    drawn = [seed for seed in seeds if len(getattr(seed, which)) >= 2]
    curves = [getattr(seed, which) for seed in drawn]
    if curves:
        end = min(curve[-1][0] for curve in curves)
        grid = np.linspace(max(curve[0][0] for curve in curves), end, CURVE_GRID)
        values = np.array([np.interp(grid, *zip(*curve, strict=True)) for curve in curves])
        if len(curves) > 1:
            points, intervals = _interval_estimates(
                {"curve": values[:, None, :]}, lambda scores: scores.mean(axis=(0, 1))
            )
            axes.fill_between(
                grid, intervals["curve"][0], intervals["curve"][1], alpha=0.25, label="95% interval"
            )
            axes.plot(grid, points["curve"], label=f"mean of {len(curves)} seeds")
        else:
            axes.plot(grid, values[0], label=f"seed {drawn[0].seed}")
    axes.set_xlabel("environment steps")
    axes.set_ylabel(label)
    axes.legend()
