"""Training configuration: every algorithm's hyperparameters and the warm start, as frozen records.

A policy's metadata stores them (`"hyperparameters"`, `"warm_start"`); `xlabench retrain --set
KEY=VALUE` replaces one field (`hyperparameters_of`). Why the values are what they are, with the
trials behind them: docs/design.md ("The warm start: what the trials chose", "PPO held near its
warm start").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

ALGORITHMS = ("ppo", "ppo-shaping", "ppo-value", "a2c", "dqn", "trpo")

# Shared by every algorithm's network (the paper's MLP).
GAMMA = 0.99
NET_ARCH = (128, 128)
ACTIVATION = "tanh"


@dataclass(frozen=True)
class AlgorithmConfig:
    """Keyword arguments of a stable-baselines3 / sb3-contrib model's constructor."""

    def to_json(self) -> dict[str, Any]:
        """The metadata form, with the network settings every algorithm shares first."""
        return {"gamma": GAMMA, "net_arch": list(NET_ARCH), "activation": ACTIVATION, **asdict(self)}

    def model_arguments(self) -> dict[str, Any]:
        """What the model's constructor takes (settings of xlabench's own wrappers left out)."""
        return asdict(self)


@dataclass(frozen=True)
class PPOConfig(AlgorithmConfig):
    """MaskablePPO (sb3-contrib), the paper's setup, optionally anchored to its warm start."""

    learning_rate: float = 3e-4
    n_steps: int = 128  # per environment, between updates
    batch_size: int = 64
    n_epochs: int = 10
    gae_lambda: float = 0.95
    clip_range: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    # Stop an update's epochs once the policy moved this far (approximate KL) from the one that
    # collected the rollouts; None: never.
    target_kl: float | None = None
    # Weight of KL(warm start ‖ policy) in the loss (`xlabench.agents.anchored`): PPO moves the
    # cloned policy where the advantage says so and stays near it elsewhere. 0: plain MaskablePPO.
    clone_kl_coef: float = 0.0


@dataclass(frozen=True)
class ShapingPPOConfig(PPOConfig):
    """PPO plus potential-based shaping from XLA's cost analysis (`CostShaping`)."""

    shaping_coefficient: float = 0.1

    def model_arguments(self) -> dict[str, Any]:
        """PPO's arguments: the shaping is the environment wrapper's."""
        arguments = asdict(self)
        arguments.pop("shaping_coefficient")
        return arguments


@dataclass(frozen=True)
class A2CConfig(AlgorithmConfig):
    """A2C (stable-baselines3)."""

    learning_rate: float = 7e-4
    n_steps: int = 8
    gae_lambda: float = 0.95
    ent_coef: float = 0.0
    vf_coef: float = 0.5


@dataclass(frozen=True)
class DQNConfig(AlgorithmConfig):
    """DQN (stable-baselines3), exploring among allowed actions only (`MaskedDQN`)."""

    learning_rate: float = 1e-4
    buffer_size: int = 50_000
    learning_starts: int = 500
    batch_size: int = 64
    train_freq: int = 4
    target_update_interval: int = 500
    exploration_fraction: float = 0.3
    exploration_final_eps: float = 0.05


@dataclass(frozen=True)
class TRPOConfig(AlgorithmConfig):
    """TRPO (sb3-contrib)."""

    learning_rate: float = 1e-3
    n_steps: int = 128
    batch_size: int = 64
    gae_lambda: float = 0.95
    target_kl: float = 0.01


HYPERPARAMETERS: dict[str, AlgorithmConfig] = {
    # The shipped policy's: an entropy bonus to explore, held near its warm start by the KL anchor
    # (trial D, chosen on val: docs/measurements.md 2026-11-27).
    "ppo": PPOConfig(ent_coef=0.01, clone_kl_coef=0.1),
    "ppo-shaping": ShapingPPOConfig(),
    "ppo-value": PPOConfig(),
    "a2c": A2CConfig(),
    "dqn": DQNConfig(),
    "trpo": TRPOConfig(),
}


def hyperparameters_of(algorithm: str, overrides: dict[str, Any] | None = None) -> AlgorithmConfig:
    """`algorithm`'s hyperparameters, with `overrides` (`retrain --set KEY=VALUE`) replacing fields."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"{algorithm}: unknown algorithm")
    config = HYPERPARAMETERS[algorithm]
    known = [field.name for field in fields(config)]
    unknown = sorted(set(overrides or {}) - set(known))
    if unknown:
        raise ValueError(
            f"{algorithm} has no hyperparameter {', '.join(unknown)} (it has {', '.join(known)})"
        )
    return replace(config, **(overrides or {}))


@dataclass(frozen=True)
class WarmStartConfig:
    """Behaviour cloning of XLA's own order, then DAgger (`xlabench.agents.imitation`)."""

    # Only this many of each family's graphs, the smallest; None: every training graph.
    per_family: int | None = None
    # ... of each "family", or of each "kind" of program in it (`imitation.program_kind`: the
    # control-flow program, inference or training, the dtype), so that no kind goes unseen.
    group_by: str = "family"
    # Compiler calls per graph to improve XLA's order before it is imitated (`improve_order`):
    # appending one of its passes or dropping one, while that lowers R. 0: XLA's order as it is.
    improve_budget: int = 100
    # Passes whose single run `improve_order` may also insert where XLA iterates them (empty: none);
    # an order is kept only if its outputs stay numerically no worse than XLA's default's.
    improve_insertions: tuple[str, ...] = ()
    epochs: int = 400
    learning_rate: float = 3e-3
    batch_size: int = 64
    # Per state where the expert follows XLA's next pass, this many copies with another pass as XLA's
    # next and as the label (`imitation.with_followed_copies`): following `xla_next` is shown for every
    # pass, not only for those of the training graphs' orders. 0: none (the policy network departs from
    # XLA's next pass only as demonstrated, `FollowsXlaOrderPolicy`; with 1 copy and no such constraint
    # the warm start still left XLA's order on foreign modules: docs/design.md).
    follow_copies: int = 0
    # Rounds of DAgger: roll out, label the states the policy reaches with XLA's order from there, fit.
    dagger_rounds: int = 4
    # Passes in at least this share of the training graphs' orders are tried in every order, even
    # where XLA's run left them with nothing to do (`with_tries`); None: XLA's effective order only.
    try_share: float | None = 0.5
    # The version before (`previous`: its label) is what a new version is held to: on each training graph
    # with a stored baseline, its sequence (`starts`) is where the warm start starts if it counts below
    # XLA's order there; such a graph joins the warm start's graphs.
    previous: str | None = None
    starts: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def with_starts(self, previous: str, starts: dict[str, tuple[str, ...]]) -> WarmStartConfig:
        """This configuration, starting from the version before's sequences on these graphs."""
        return replace(self, previous=previous, starts={name: tuple(seq) for name, seq in starts.items()})

    def to_json(self) -> dict[str, Any]:
        """The metadata form: a dict of the fields (of `starts`, the graphs: the sequences are the
        previous version's stored baselines)."""
        data = asdict(self)
        data["improve_insertions"] = list(self.improve_insertions)
        data["starts"] = sorted(self.starts)
        return data
