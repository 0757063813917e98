"""Train a pass-ordering policy with stable-baselines3 / sb3-contrib: every hyperparameter is here.

Read top to bottom: the environment settings, the hyperparameters of each algorithm, how the
vectorised environments are built (one compiler worker per environment process, all sharing the
transition cache, so revisited states cost nothing), the progress bar, and `train`.

Algorithms (the paper's comparison):
- ppo: MaskablePPO, the paper's setup (MLP, GAE lambda 0.95, clip 0.2, entropy 0), optionally held
  near its warm start by a KL penalty (`clone_kl_coef`, `xlabench.agents.anchored`);
- ppo-shaping: ppo plus potential-based shaping from XLA's cost analysis (`CostShaping`);
- ppo-value: ppo whose value function also sees the cost analysis (`ValueFeaturesPolicy`);
- a2c, dqn (stable-baselines3) and trpo (sb3-contrib): masked too, through the observation
  (`xlabench.agents.masking`, `xlabench.policies.networks`): a masked action is never taken.
The policy never sees the cost analysis (`ObservationExtractor` hides it), so a rollout needs none.
"""

from __future__ import annotations

import hashlib
import json
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium
import numpy as np

ALGORITHMS = ("ppo", "ppo-shaping", "ppo-value", "a2c", "dqn", "trpo")

# The environment every algorithm trains in (see xlabench.env.PassOrderingEnv). Counting only at
# the episode's end makes a step ~16x cheaper (`xlabench bench env`); the return is the same.
# 64 steps: XLA's own order on a 3-layer T5 bf16 step changes the module 56 times (reshape-mover
# alone ~45: it moves one layer of reshapes a run); with 30, a policy cannot reach the default there.
# Fixed-point variants (see xlabench.xla.catalogue): with single runs, policies trained on the train
# split stopped one reshape-mover short of XLA on deeper unseen graphs (mlp_mixer, gnn inference).
# With both a variant and its single run, the warm start imitates the single run where one run
# reaches the fixed point (`with_single_runs`): ~3 calls a graph fewer (docs/design.md, "Single runs
# beside the variants").
ENVIRONMENT: dict[str, Any] = {
    "action_set": "fixed-point-and-single",
    "max_steps": 64,
    "error_penalty": 0.01,
    "count_every_step": False,
    # Mask passes known to change nothing before they run (no opcodes to rewrite, a fixed point just
    # reached). Off: in five warm-start trials it saved at most a call a graph and cost unseen graphs
    # (docs/design.md, "Passes known to change nothing").
    "mask_inapplicable": False,
    # What the return is measured against: the raw module's count ("unoptimized", (R0 - R) / R0) or
    # XLA's default count ("default", (D - R) / D): `xlabench retrain --reward-baseline`.
    "reward_baseline": "unoptimized",
}

# One torch thread: the networks are small MLPs and the cores belong to the compiler workers. On 2
# cores next to them, 400 epochs of cloning ran 4.5x slower with torch's default of 2 threads.
TORCH_THREADS = 1
GAMMA = 0.99
NET_ARCH = [128, 128]
ACTIVATION = "tanh"

HYPERPARAMETERS: dict[str, dict[str, Any]] = {
    "ppo": {
        "learning_rate": 3e-4,
        "n_steps": 128,  # per environment, between updates
        "batch_size": 64,
        "n_epochs": 10,
        "gae_lambda": 0.95,
        "clip_range": 0.2,
        "ent_coef": 0.0,
        "vf_coef": 0.5,
        "max_grad_norm": 0.5,
        # Stop an update's epochs once the policy moved this far (approximate KL) from the one that
        # collected the rollouts; None: never.
        "target_kl": None,
        # Weight of KL(warm start ‖ policy) in the loss (`xlabench.agents.anchored`): PPO moves the
        # cloned policy where the advantage says so and stays near it elsewhere. 0: plain MaskablePPO.
        "clone_kl_coef": 0.0,
    },
    "a2c": {"learning_rate": 7e-4, "n_steps": 8, "gae_lambda": 0.95, "ent_coef": 0.0, "vf_coef": 0.5},
    "dqn": {
        "learning_rate": 1e-4,
        "buffer_size": 50_000,
        "learning_starts": 500,
        "batch_size": 64,
        "train_freq": 4,
        "target_update_interval": 500,
        "exploration_fraction": 0.3,
        "exploration_final_eps": 0.05,
    },
    "trpo": {"learning_rate": 1e-3, "n_steps": 128, "batch_size": 64, "gae_lambda": 0.95, "target_kl": 0.01},
}
HYPERPARAMETERS["ppo-shaping"] = {**HYPERPARAMETERS["ppo"], "shaping_coefficient": 0.1}
HYPERPARAMETERS["ppo-value"] = dict(HYPERPARAMETERS["ppo"])

# Warm start (actor-critic algorithms): behaviour cloning of XLA's own effective order on the
# training graphs before any reinforcement learning, then `dagger_rounds` of DAgger: roll out,
# label the states the policy reaches with XLA's order from there, fit again
# (`xlabench.agents.imitation`). `per_family` None: every training graph (XLA's order on one
# costs one compile, its demonstration a pass application per step).
WARM_START: dict[str, Any] = {
    "per_family": None,
    # Compiler calls per graph to improve XLA's order before it is imitated (`improve_order`):
    # appending one of its passes or dropping one, while that lowers R. 0: XLA's order as it is.
    "improve_budget": 100,
    # Passes whose single run `improve_order` may also insert where XLA iterates them (empty: none);
    # an order is kept only if its outputs stay numerically no worse than XLA's default's (the
    # reference rule, `judge_sequence`). The trials: docs/design.md, "The warm start".
    "improve_insertions": (),
    "epochs": 400,
    "learning_rate": 3e-3,
    "batch_size": 64,
    "dagger_rounds": 4,
    # Passes in at least this share of the training graphs' orders are tried in every order, even
    # where XLA's run left them with nothing to do (`with_tries`); None: XLA's effective order only.
    # 0.5: the trials in docs/design.md, "The warm start".
    "try_share": 0.5,
}


@dataclass
class TrainingRun:
    """What `train` returns: the model, and how the run went."""

    model: Any
    algorithm: str
    hyperparameters: dict[str, Any]
    environment: dict[str, Any]
    actions: list[str]
    steps: int
    episodes: int
    seconds: float
    seed: int
    graphs: str
    environments: int
    warm_start: dict[str, Any] | None = None  # behaviour cloning's figures, when it ran
    # The network's weights after the warm start, before any PPO update (None without a warm start).
    warm_start_tensors: dict[str, Any] | None = None
    # Training curve: (environment steps, mean episode return) at up to CURVE_POINTS points.
    curve: list[tuple[int, float]] = field(default_factory=list)

    def metadata(self, name: str, driver: Any) -> dict[str, Any]:
        """A policy artifact's metadata for this run (`xlabench.policies.artifact.save` adds the rest)."""
        from importlib.metadata import version

        from xlabench.env.pass_ordering import observation_space
        from xlabench.policies.artifact import observation_spec

        catalogue = json.dumps(driver.catalogue.to_dict(), sort_keys=True).encode()
        return {
            "name": name,
            "version": "(new)",
            "algorithm": self.algorithm,
            "jaxlib_version": driver.jaxlib_version,
            "catalogue_sha256": hashlib.sha256(catalogue).hexdigest(),
            "actions": self.actions,
            "observation_spec": observation_spec(observation_space(len(self.actions))),
            "environment": self.environment,
            "hyperparameters": self.hyperparameters,
            "seed": self.seed,
            "warm_start": self.warm_start,
            "training": {
                "graphs": self.graphs,
                "steps": self.steps,
                "episodes": self.episodes,
                "seconds": round(self.seconds, 1),
                "environments": self.environments,
                "curve": [[step, round(value, 6)] for step, value in self.curve],
            },
            "packages": {
                package: version(package)
                for package in ("xlabench", "torch", "stable_baselines3", "sb3_contrib", "gymnasium")
            },
            "eval": {},
        }


def make_environment(
    graphs: str,
    algorithm: str,
    seed: int,
    rank: int,
    own_process: bool = False,
    environment: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
) -> Callable[[], gymnasium.Env]:
    """A factory for one training environment (`own_process`: it runs in a process of its own) with
    `environment`'s settings (default `ENVIRONMENT`) and `overrides` of the hyperparameters."""
    settings = dict(ENVIRONMENT if environment is None else environment)
    hyperparameters = hyperparameters_of(algorithm, overrides)

    def build() -> gymnasium.Env:
        from stable_baselines3.common.monitor import Monitor

        if own_process:
            # Ctrl-C reaches the whole process group; only the trainer acts on it, then closes the
            # environments in order. An environment process killed mid-step would break its pipe.
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        from xlabench.agents.masking import MaskInObservation
        from xlabench.agents.wrappers import CostShaping
        from xlabench.env import PassOrderingEnv
        from xlabench.policies.networks import MASKABLE
        from xlabench.xla import PassDriver
        from xlabench.xla.pool import CompilerPool

        env: gymnasium.Env = PassOrderingEnv(
            graphs=graphs, driver=PassDriver(pool=CompilerPool(size=1)), **settings
        )
        if algorithm == "ppo-shaping":
            env = CostShaping(env, GAMMA, hyperparameters["shaping_coefficient"])
        if algorithm not in MASKABLE:
            env = MaskInObservation(env)
        env = Monitor(env)
        env.reset(seed=seed + rank)
        env.action_space.seed(seed + rank)
        return env

    return build


def hyperparameters_of(algorithm: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """`algorithm`'s hyperparameters from this file, with `overrides` (`retrain --set KEY=VALUE`)."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"{algorithm}: unknown algorithm")
    settings = dict(HYPERPARAMETERS[algorithm])
    unknown = sorted(set(overrides or {}) - set(settings))
    if unknown:
        known = ", ".join(settings)
        raise ValueError(f"{algorithm} has no hyperparameter {', '.join(unknown)} (it has {known})")
    return {**settings, **(overrides or {})}


def build_model(
    algorithm: str, env: Any, seed: int, logdir: str | None, overrides: dict[str, Any] | None = None
) -> Any:
    """The stable-baselines3 / sb3-contrib model of `algorithm`, with this file's hyperparameters
    (`overrides` replace some)."""
    from sb3_contrib import TRPO
    from stable_baselines3 import A2C

    from xlabench.agents.anchored import AnchoredMaskablePPO
    from xlabench.agents.masking import MaskedDQN
    from xlabench.policies.networks import policy_class, policy_kwargs

    settings = hyperparameters_of(algorithm, overrides)
    settings.pop("shaping_coefficient", None)
    common = {"gamma": GAMMA, "seed": seed, "tensorboard_log": logdir, "verbose": 0, "device": "cpu"}
    model_class = {"a2c": A2C, "dqn": MaskedDQN, "trpo": TRPO}.get(algorithm, AnchoredMaskablePPO)
    return model_class(
        policy_class(algorithm), env, policy_kwargs=policy_kwargs(NET_ARCH, ACTIVATION), **settings, **common
    )


def progress_callback(total_steps: int) -> Any:
    """A tqdm bar: steps, episodes, mean return of the last 100 episodes, compiler calls/s, ETA."""
    from stable_baselines3.common.callbacks import BaseCallback
    from tqdm import tqdm

    class Progress(BaseCallback):
        def _on_training_start(self) -> None:
            self.bar = tqdm(total=total_steps, desc="retrain", unit="step")
            self.returns: deque[float] = deque(maxlen=100)
            self.episodes = 0
            self.started = time.perf_counter()

        def _on_step(self) -> bool:
            for info in self.locals.get("infos", []):
                if "episode" in info:
                    self.episodes += 1
                    self.returns.append(float(info["episode"]["r"]))
            self.bar.update(self.training_env.num_envs)
            if self.n_calls % 10 == 0:
                elapsed = max(time.perf_counter() - self.started, 1e-9)
                mean = f"{np.mean(self.returns):.4f}" if self.returns else "-"
                calls = self.training_env.env_method("compiler_calls")
                rate = sum(count["xla"] + count["cached"] for count in calls) / elapsed
                self.bar.set_postfix_str(f"episodes {self.episodes}, return {mean}, calls/s {rate:.1f}")
            return True

        def _on_training_end(self) -> None:
            self.close()

        def close(self) -> None:
            """Close the bar (also when training is interrupted: no bar redrawn after the error)."""
            if hasattr(self, "bar"):
                self.bar.close()

    return Progress()


def train(
    algorithm: str = "ppo",
    graphs: str = "train",
    steps: int = 10_000,
    seed: int = 0,
    environments: int = 2,
    logdir: str | None = None,
    progress: bool = True,
    ray_address: str | None = None,
    warm_start: bool = False,
    environment: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
) -> TrainingRun:
    """Train `algorithm` on the graphs of a SPEC for `steps` environment steps.

    The environments run in local processes, or as Ray actors on the cluster at `ray_address`, with
    `environment`'s settings (default `ENVIRONMENT`) and `overrides` of `HYPERPARAMETERS`. With
    `warm_start`, the policy first imitates XLA's own order on the same graphs.
    """
    environment = dict(ENVIRONMENT if environment is None else environment)
    if warm_start and algorithm == "dqn":
        raise ValueError("a warm start needs an actor-critic algorithm, not dqn")
    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from xlabench.policies.networks import MASKABLE
    from xlabench.xla import default_driver

    torch.set_num_threads(TORCH_THREADS)
    own_process = environments > 1 and ray_address is None
    factories = [
        make_environment(graphs, algorithm, seed, rank, own_process, environment, overrides)
        for rank in range(environments)
    ]
    if ray_address is not None:
        from xlabench.agents.ray_vec_env import RayVecEnv
        from xlabench.cluster import connect

        vector: Any = RayVecEnv(factories, connect(ray_address))
    else:
        vector = SubprocVecEnv(factories) if environments > 1 else DummyVecEnv(factories)
    started = time.perf_counter()
    try:
        model = build_model(algorithm, vector, seed, logdir, overrides)
        cloned = _warm_start(model, graphs, seed, environments, environment) if warm_start else None
        if cloned is not None and algorithm in MASKABLE:
            model.set_anchor()
        clone = {key: value.detach().clone() for key, value in model.policy.state_dict().items()}
        if steps > 0:  # 0: the warm start alone
            callback = progress_callback(steps) if progress else None
            try:
                model.learn(total_timesteps=steps, callback=callback, tb_log_name=algorithm)
            finally:
                if callback is not None:
                    callback.close()
        returns, lengths = vector.get_attr("episode_returns"), vector.get_attr("episode_lengths")
        episodes = int(sum(len(buffer) for buffer in returns))
    except KeyboardInterrupt:
        # Ctrl-C can land between the environments' answers to one step (`step_wait`): close()
        # would wait for answers already read, forever. They finish their step, then read "close".
        if isinstance(vector, SubprocVecEnv):
            vector.waiting = False
        raise
    finally:
        vector.close()
    return TrainingRun(
        model=model,
        algorithm=algorithm,
        hyperparameters={
            "gamma": GAMMA,
            "net_arch": NET_ARCH,
            "activation": ACTIVATION,
            **hyperparameters_of(algorithm, overrides),
        },
        environment=environment,
        actions=default_driver().catalogue.action_passes(environment["action_set"]),
        steps=int(model.num_timesteps),
        episodes=episodes,
        seconds=time.perf_counter() - started,
        seed=seed,
        graphs=graphs,
        environments=environments,
        warm_start=cloned,
        warm_start_tensors=clone if cloned is not None else None,
        curve=learning_curve(returns, lengths),
    )


CURVE_POINTS = 50


def learning_curve(returns: list[list[float]], lengths: list[list[int]]) -> list[tuple[int, float]]:
    """Mean episode return per bin of training steps, from each environment's Monitor buffers.

    An episode ending at its environment's k-th step ends near global step k × environments.
    """
    ends = [
        (int(end) * len(lengths), float(value))
        for env_returns, env_lengths in zip(returns, lengths, strict=True)
        for end, value in zip(np.cumsum(env_lengths), env_returns, strict=True)
    ]
    if not ends:
        return []
    ends.sort()
    bins = np.array_split(np.arange(len(ends)), min(CURVE_POINTS, len(ends)))
    return [(ends[b[-1]][0], float(np.mean([ends[i][1] for i in b]))) for b in bins]


def _warm_start(
    model: Any, graphs: str, seed: int, workers: int, environment: dict[str, Any]
) -> dict[str, Any]:
    """Behaviour cloning of XLA's effective order, then DAgger (`xlabench.agents.imitation`)."""
    from xlabench.agents.imitation import aggregate, behaviour_cloning, demonstrations
    from xlabench.xla import PassDriver
    from xlabench.xla.pool import CompilerPool

    started = time.perf_counter()
    cloning = {key: WARM_START[key] for key in ("epochs", "learning_rate", "batch_size")}
    pool = CompilerPool(size=max(1, workers))
    try:
        driver = PassDriver(pool=pool)
        data = demonstrations(
            graphs,
            environment,
            driver,
            workers,
            WARM_START["per_family"],
            WARM_START["improve_budget"],
            GAMMA,
            WARM_START["try_share"],
            WARM_START["improve_insertions"],
        )
        improved = {name: pair for name, pair in data.counts.items() if pair[1] < pair[0]}
        figures = behaviour_cloning(model.policy, data, seed=seed, **cloning)
        rounds = []
        for round_ in range(WARM_START["dagger_rounds"]):
            data, visited = aggregate(
                model.policy, data, graphs, environment, driver, workers, WARM_START["per_family"], GAMMA
            )
            figures = behaviour_cloning(model.policy, data, seed=seed + round_ + 1, **cloning)
            rounds.append({**visited, "accuracy": figures["accuracy"]})
    finally:
        pool.close()
    return {
        **WARM_START,
        **figures,
        # Graphs where the improved order beat XLA's, with (R of XLA's order, R improved).
        "improved_orders": {name: list(pair) for name, pair in sorted(improved.items())},
        "dagger": rounds,
        "tries": data.tries,
        "seconds": round(time.perf_counter() - started, 1),
    }
