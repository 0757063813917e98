"""Train a pass-ordering policy with stable-baselines3 / sb3-contrib.

The configuration is in `xlabench.agents.algorithm_config` (hyperparameters, warm start) and
`xlabench.env.environment_config` (the environment). Read this file top to bottom: how the
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
import os
import signal
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

import gymnasium
import numpy as np

from xlabench.agents.algorithm_config import (
    ACTIVATION,
    GAMMA,
    NET_ARCH,
    AlgorithmConfig,
    ShapingPPOConfig,
    WarmStartConfig,
    hyperparameters_of,
)
from xlabench.agents.imitation import (
    EXPERT,
    aggregate,
    behaviour_cloning,
    demonstrations,
    warm_start_graphs,
)
from xlabench.agents.wrappers import CostShaping
from xlabench.cluster import connect
from xlabench.env import PassOrderingEnv
from xlabench.env.environment_config import EnvironmentConfig
from xlabench.env.observation import observation_space
from xlabench.graphs import Graph
from xlabench.policies.artifact import observation_spec
from xlabench.policies.policy import LOWEST_PAST_XLA_ORDER
from xlabench.settings import Settings, carried_over, current, in_effect, runs_under_its_settings
from xlabench.xla import PassDriver, default_driver
from xlabench.xla.compilers.named_compilers import describe_compiler
from xlabench.xla.compilers.worker_pool import CompilerPool

# The environment every algorithm trains in and the warm start before it: the shipped configuration.
# The policy sees where the episode stands in XLA's own order on the module (`env/xla_order.py`), and
# has room for the longest of those orders (a bf16 training step's reaches ~90 passes, most of them
# repeats a known no-op answers without a compiler call).
# The return is measured against XLA's default count, so every graph's return is 0 at XLA's level.
# The warm start improves XLA's order (100 calls a graph) on the smallest training graph of each
# program kind (88 of 201): the 6 smallest of each family at 30 calls left the control-flow programs
# newton_cg and cond_train and most training steps unseen (docs/design.md, "The warm start sees
# every kind of program"). All 191 at 100 calls would take ~1.5 h from an empty cache; 300 calls
# made a worse candidate on val (measurements.md, 2026-12-06).
# A pass the policy leaves out of XLA's order no longer holds the cursor (`xla_order_skip`): dropping
# `tree_reduction_rewriter` on an LSTM training step in bf16 left every later step a departure from it.
ENVIRONMENT = EnvironmentConfig()  # the shipped policy's, which are the defaults
# No tries: the expert follows `xla_next` (`xlabench.agents.imitation.EXPERT`), which shows none.
WARM_START = WarmStartConfig(per_family=1, group_by="kind", improve_budget=100, try_share=None)
# How a version's rollout ends (`xlabench.policies.policy.STOP_RULES`): past XLA's order, on the lowest
# count it reached. The passes a policy plays there pay off on the graphs they were learnt on and not
# always elsewhere (docs/design.md, "The stop").
ROLLOUT = {"stop": LOWEST_PAST_XLA_ORDER}


@dataclass
class TrainingRun:
    """What `train` returns: the model, and how the run went."""

    # None for a run read back from a checkpoint (`xlabench.agents.retrain_checkpoint`): only its weights
    model: Any
    algorithm: str
    hyperparameters: AlgorithmConfig
    environment: EnvironmentConfig
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
    # With a `Validation`: (environment steps, geomean vs_default of the greedy rollout on its graphs).
    validation_curve: list[tuple[int, float]] = field(default_factory=list)
    # The policy network's weights at the end of the run (its state_dict).
    weights: dict[str, Any] = field(default_factory=dict)
    # The graphs PPO's environments ran on when not all of `graphs`: the warm start's (`per_family`);
    # empty when PPO ran on all of them or made no step (`steps` says which).
    ppo_graphs: list[str] = field(default_factory=list)

    def metadata(self, name: str, driver: Any) -> dict[str, Any]:
        """A policy artifact's metadata for this run (`xlabench.policies.artifact.save` adds the rest)."""

        catalogue = json.dumps(driver.catalogue.to_dict(), sort_keys=True).encode()
        return {
            "name": name,
            "version": "(new)",
            "algorithm": self.algorithm,
            "jaxlib_version": driver.jaxlib_version,
            "compiler": describe_compiler(driver.compiler),  # its name, kind, XLA options and build
            "catalogue_sha256": hashlib.sha256(catalogue).hexdigest(),
            "actions": self.actions,
            "observation_spec": observation_spec(
                observation_space(len(self.actions), self.environment.observe_xla_order)
            ),
            "environment": self.environment.to_json(),
            "rollout": dict(ROLLOUT),
            "hyperparameters": self.hyperparameters.to_json(),
            "seed": self.seed,
            "warm_start": self.warm_start,
            "training": {
                "graphs": self.graphs,
                "ppo_graphs": self.ppo_graphs,
                "steps": self.steps,
                "episodes": self.episodes,
                "seconds": round(self.seconds, 1),
                "environments": self.environments,
                "curve": [[step, round(value, 6)] for step, value in self.curve],
                "validation_curve": [[step, round(value, 6)] for step, value in self.validation_curve],
            },
            "packages": package_versions(),
            "eval": {},
        }


def package_versions() -> dict[str, str]:
    """The versions of the packages a trained policy depends on, besides jaxlib."""
    return {
        package: version(package)
        for package in ("xlabench", "torch", "stable_baselines3", "sb3_contrib", "gymnasium")
    }


def make_environment(
    graphs: str | Sequence[Graph],
    algorithm: str,
    seed: int,
    rank: int,
    *,
    own_process: bool = False,
    environment: EnvironmentConfig = ENVIRONMENT,
    hyperparameters: AlgorithmConfig | None = None,
    settings: Settings | None = None,
) -> Callable[[], gymnasium.Env]:
    """A factory for one training environment (`own_process`: it runs in a process of its own) with
    `environment`'s settings, wrapped as `algorithm` (with `hyperparameters`, default its own) needs;
    its compiler runs under `settings` (default: those in effect here)."""
    config = hyperparameters or hyperparameters_of(algorithm)
    # Resolved here, in the caller. The factory may run in another process (SubprocVecEnv, a Ray actor,
    # perhaps on another machine): there it takes what the command chose and that process's own caches.
    settings = settings or current()
    carried, maker = settings.carried(), os.getpid()

    def build() -> gymnasium.Env:
        from stable_baselines3.common.monitor import Monitor

        if own_process:
            # Ctrl-C reaches the whole process group; only the trainer acts on it, then closes the
            # environments in order. An environment process killed mid-step would break its pipe.
            signal.signal(signal.SIGINT, signal.SIG_IGN)

        from xlabench.agents.masking import MaskInObservation
        from xlabench.policies.networks import MASKABLE

        here = settings if os.getpid() == maker else carried_over(carried)
        with in_effect(here):  # a user's graph files are counted as they load, by this compiler
            env: gymnasium.Env = PassOrderingEnv(
                graphs=graphs,
                driver=PassDriver(pool=CompilerPool(size=1, settings=here), settings=here),
                **environment.to_json(),
            )
        if isinstance(config, ShapingPPOConfig):
            env = CostShaping(env, GAMMA, config.shaping_coefficient)
        if algorithm not in MASKABLE:
            env = MaskInObservation(env)
        env = Monitor(env)
        env.reset(seed=seed + rank)
        env.action_space.seed(seed + rank)
        return env

    return build


def build_model(
    algorithm: str,
    env: Any,
    seed: int,
    logdir: str | None = None,
    hyperparameters: AlgorithmConfig | None = None,
) -> Any:
    """The stable-baselines3 / sb3-contrib model of `algorithm`, with `hyperparameters` (default its own)."""
    from sb3_contrib import TRPO
    from stable_baselines3 import A2C

    from xlabench.agents.anchored import AnchoredMaskablePPO
    from xlabench.agents.masking import MaskedDQN
    from xlabench.policies.networks import XLA_NEXT_KEY, policy_class, policy_kwargs, use_torch_threads

    use_torch_threads()
    config = hyperparameters or hyperparameters_of(algorithm)
    common = {"gamma": GAMMA, "seed": seed, "tensorboard_log": logdir, "verbose": 0, "device": "cpu"}
    model_class = {"a2c": A2C, "dqn": MaskedDQN, "trpo": TRPO}.get(algorithm, AnchoredMaskablePPO)
    follows = XLA_NEXT_KEY in getattr(env.observation_space, "spaces", {})
    model = model_class(
        policy_class(algorithm, follows_xla_order=follows),
        env,
        policy_kwargs=policy_kwargs(list(NET_ARCH), ACTIVATION),
        **config.model_arguments(),
        **common,
    )
    if logdir is None:
        # Without a log directory SB3 would log to a new `SB3-<date>` folder in the temp directory,
        # left behind by every run: a logger that writes nowhere instead.
        from stable_baselines3.common.logger import Logger

        model.set_logger(Logger(folder=None, output_formats=[]))
    return model


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


@dataclass(frozen=True)
class Validation:
    """Greedy rollouts of the policy being trained on held-out graphs: the curve of the policy as `eval`
    sees it (one deterministic episode a graph), not of the sampled episodes PPO learns from."""

    graphs: str  # a SPEC, e.g. "val"
    every: int  # environment steps between two rollouts; the first is before any update


def validation_callback(
    validation: Validation, metadata: dict[str, Any], settings: Settings | None = None
) -> Any:
    """A callback that rolls the current policy out on `validation.graphs` before the first update,
    every `validation.every` steps and at the end; `.curve` holds (steps, geomean vs_default)."""
    from pathlib import Path

    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    from xlabench.graphs import resolve_graphs
    from xlabench.policies.artifact import Artifact
    from xlabench.policies.policy import Policy, rollout

    graphs = resolve_graphs(validation.graphs)

    class Validate(BaseCallback):
        def _on_training_start(self) -> None:
            self.curve: list[tuple[int, float]] = []
            self.pool = CompilerPool(size=1, settings=settings)
            self.driver = PassDriver(pool=self.pool, settings=settings)
            self.defaults: dict[str, int] = {}
            self.next_at = self.num_timesteps
            self._validate()

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_at:
                self._validate()
            return True

        def _on_training_end(self) -> None:
            if not self.curve or self.curve[-1][0] != self.num_timesteps:
                self._validate()

        def close(self) -> None:
            """Stop the rollouts' compiler (also when training was interrupted)."""
            if hasattr(self, "pool"):
                self.pool.close()

        def _validate(self) -> None:
            # An observer: building the rollout's network draws from torch's generator, which PPO samples
            # its actions from; forked, training goes on as it would without validation.
            with torch.random.fork_rng(devices=[]):
                self._roll_out()
            self.next_at = self.num_timesteps + validation.every

        def _roll_out(self) -> None:
            tensors = {key: value.detach().clone() for key, value in self.model.policy.state_dict().items()}
            label = {"name": "(training)", "version": f"(step {self.num_timesteps})"}
            policy = Policy(Artifact(Path("(in training)"), {**metadata, **label}, tensors))
            logs = []
            for graph in graphs:
                if graph.name not in self.defaults:
                    module = self.driver.load(graph.hlo_text(), graph.name)
                    default = self.driver.run_default_pipeline(module)
                    self.defaults[graph.name] = self.driver.features(default).op_count
                found = rollout(policy, self.driver, graph)
                logs.append(np.log(self.defaults[graph.name] / found.op_count))
            self.curve.append((int(self.num_timesteps), float(np.exp(np.mean(logs)))))

    return Validate()


@runs_under_its_settings
def train(
    *,
    algorithm: str = "ppo",
    graphs: str = "train",
    steps: int = 10_000,
    seed: int = 0,
    environments: int = 2,
    logdir: str | None = None,
    progress: bool = True,
    ray_address: str | None = None,
    warm_start: WarmStartConfig | None = None,
    environment: EnvironmentConfig = ENVIRONMENT,
    hyperparameters: AlgorithmConfig | None = None,
    validation: Validation | None = None,
    settings: Settings | None = None,
) -> TrainingRun:
    """Train `algorithm` on the graphs of a SPEC for `steps` environment steps.

    The environments run in local processes, or as Ray actors on the cluster at `ray_address`, with
    `environment`'s settings and `hyperparameters` (default the algorithm's own, `HYPERPARAMETERS`).
    With a `warm_start`, the policy first imitates XLA's own order on the same graphs; with a
    `validation`, its greedy rollout on held-out graphs is measured during training (`validation_curve`).
    Every compiler call runs under `settings` (default: those in effect), in every process.
    """
    settings = settings or current()
    config = hyperparameters or hyperparameters_of(algorithm)
    if warm_start is not None and algorithm == "dqn":
        raise ValueError("a warm start needs an actor-critic algorithm, not dqn")
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from xlabench.policies.networks import MASKABLE

    own_process = environments > 1 and ray_address is None
    # PPO fine-tunes on the warm start's graphs: their transitions near the cloned policy are in the
    # cache, so a step costs milliseconds, not a compile (~0.4 s on the larger training graphs).
    trained_on: str | list[Graph] = graphs
    if warm_start is not None and warm_start.per_family is not None:
        # The graphs themselves, not their names: a user's directory resolves by path, not by name.
        trained_on = warm_start_graphs(graphs, warm_start.per_family, warm_start.group_by)
    factories = [
        make_environment(
            trained_on,
            algorithm,
            seed,
            rank,
            own_process=own_process,
            environment=environment,
            hyperparameters=config,
            settings=settings,
        )
        for rank in range(environments)
    ]
    if ray_address is not None:
        from xlabench.agents.ray_vec_env import RayVecEnv

        vector: Any = RayVecEnv(factories, connect(ray_address))
    else:
        vector = SubprocVecEnv(factories) if environments > 1 else DummyVecEnv(factories)
    started = time.perf_counter()
    try:
        model = build_model(algorithm, vector, seed, logdir, config)
        cloned = None
        if warm_start is not None:
            cloned = _warm_start(model, graphs, seed, environments, environment, warm_start, settings)
        if cloned is not None and algorithm in MASKABLE:
            model.set_anchor()
        clone = {key: value.detach().clone() for key, value in model.policy.state_dict().items()}
        validate = None
        if steps > 0:  # 0: the warm start alone
            callback = progress_callback(steps) if progress else None
            if validation is not None:
                actions = default_driver(settings).catalogue.action_passes(environment.action_set)
                validate = validation_callback(
                    validation,
                    {"algorithm": algorithm, "actions": actions, "environment": environment.to_json(),
                     "rollout": dict(ROLLOUT), "hyperparameters": config.to_json()},
                    settings,
                )  # fmt: skip
            callbacks = [one for one in (callback, validate) if one is not None]
            try:
                model.learn(total_timesteps=steps, callback=callbacks, tb_log_name=algorithm)
            finally:
                for one in callbacks:
                    one.close()
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
        hyperparameters=config,
        environment=environment,
        actions=default_driver(settings).catalogue.action_passes(environment.action_set),
        steps=int(model.num_timesteps),
        episodes=episodes,
        seconds=time.perf_counter() - started,
        seed=seed,
        graphs=graphs,
        environments=environments,
        warm_start=cloned,
        warm_start_tensors=clone if cloned is not None else None,
        curve=learning_curve(returns, lengths),
        validation_curve=validate.curve if validate is not None else [],
        weights=model.policy.state_dict(),
        ppo_graphs=[graph.name for graph in trained_on] if isinstance(trained_on, list) and steps > 0 else [],
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
    model: Any,
    graphs: str,
    seed: int,
    workers: int,
    environment: EnvironmentConfig,
    config: WarmStartConfig,
    settings: Settings,
) -> dict[str, Any]:
    """Behaviour cloning of XLA's order (followed, when observed), then DAgger
    (`xlabench.agents.imitation`)."""

    started = time.perf_counter()
    cloning = {
        "epochs": config.epochs,
        "learning_rate": config.learning_rate,
        "batch_size": config.batch_size,
        "follow_copies": config.follow_copies,
    }
    pool = CompilerPool(size=max(1, workers), settings=settings)
    try:
        driver = PassDriver(pool=pool, settings=settings)
        data = demonstrations(
            graphs,
            environment,
            driver,
            workers=workers,
            per_family=config.per_family,
            group_by=config.group_by,
            improve_budget=config.improve_budget,
            gamma=GAMMA,
            try_share=config.try_share,
            insertions=config.improve_insertions,
            starts=config.starts,
        )
        improved = {name: pair for name, pair in data.counts.items() if pair[1] < pair[0]}
        figures = behaviour_cloning(model.policy, data, seed=seed, **cloning)
        rounds = []
        for round_ in range(config.dagger_rounds):
            data, visited = aggregate(
                model.policy,
                data,
                graphs,
                environment,
                driver,
                workers=workers,
                per_family=config.per_family,
                group_by=config.group_by,
                gamma=GAMMA,
            )
            figures = behaviour_cloning(model.policy, data, seed=seed + round_ + 1, **cloning)
            rounds.append({**visited, "accuracy": figures["accuracy"]})
    finally:
        pool.close()
    return {
        **config.to_json(),
        "expert": EXPERT[environment.observe_xla_order],
        "network": type(model.policy).__name__,
        **figures,
        # Graphs where the improved order beat XLA's, with (R of XLA's order, R improved).
        "improved_orders": {name: list(pair) for name, pair in sorted(improved.items())},
        "dagger": rounds,
        "tries": data.tries,
        "seconds": round(time.perf_counter() - started, 1),
    }
