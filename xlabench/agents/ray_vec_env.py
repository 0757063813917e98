"""Training environments as Ray actors: stable-baselines3's VecEnv protocol over a Ray cluster.

Each actor builds its environment from the same factory `SubprocVecEnv` would run in a local
process, so each has its own compiler pool, and the transition cache of the node it runs on (the
factory carries what the command chose, `Settings.carried`; caches and cores are the node's own).
Stepping and auto-reset follow `SubprocVecEnv` exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn
from stable_baselines3.common.vec_env.subproc_vec_env import _stack_obs


class _EnvironmentActor:
    """One environment, stepped the way SubprocVecEnv's worker steps it."""

    def __init__(self, factory: Callable[[], gymnasium.Env]) -> None:
        self.env = factory()

    def spaces(self) -> tuple[Any, Any]:
        return self.env.observation_space, self.env.action_space

    def step(self, action: Any) -> tuple[Any, float, bool, dict[str, Any], dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        done = terminated or truncated
        info["TimeLimit.truncated"] = truncated and not terminated
        reset_info: dict[str, Any] = {}
        if done:
            info["terminal_observation"] = observation
            observation, reset_info = self.env.reset()
        return observation, reward, done, info, reset_info

    def reset(self, seed: int | None, options: dict[str, Any] | None) -> tuple[Any, dict[str, Any]]:
        return self.env.reset(seed=seed, **({"options": options} if options else {}))

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return self.env.get_wrapper_attr(name)(*args, **kwargs)

    def get(self, name: str) -> Any:
        return self.env.get_wrapper_attr(name)

    def has(self, name: str) -> bool:
        try:
            self.env.get_wrapper_attr(name)
        except AttributeError:
            return False
        return True

    def set(self, name: str, value: Any) -> None:
        setattr(self.env, name, value)

    def is_wrapped(self, wrapper_class: type) -> bool:
        from stable_baselines3.common.env_util import is_wrapped

        return is_wrapped(self.env, wrapper_class)


class RayVecEnv(VecEnv):
    """`len(factories)` environments, one Ray actor (one CPU) each."""

    def __init__(self, factories: Sequence[Callable[[], gymnasium.Env]], ray: Any) -> None:
        self.ray = ray
        actor = ray.remote(num_cpus=1)(_EnvironmentActor)
        self.actors = [actor.remote(factory) for factory in factories]
        observation_space, action_space = ray.get(self.actors[0].spaces.remote())
        super().__init__(len(factories), observation_space, action_space)
        self._pending: list[Any] = []

    def step_async(self, actions: np.ndarray) -> None:
        self._pending = [a.step.remote(action) for a, action in zip(self.actors, actions, strict=True)]

    def step_wait(self) -> VecEnvStepReturn:
        results = self.ray.get(self._pending)
        self._pending = []
        observations, rewards, dones, infos, self.reset_infos = zip(*results, strict=True)
        return _stack_obs(observations, self.observation_space), np.stack(rewards), np.stack(dones), infos

    def reset(self) -> Any:
        results = self.ray.get(
            [a.reset.remote(self._seeds[i], self._options[i]) for i, a in enumerate(self.actors)]
        )
        observations, self.reset_infos = zip(*results, strict=True)
        self._reset_seeds()
        self._reset_options()
        return _stack_obs(observations, self.observation_space)

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []

    def has_attr(self, attr_name: str) -> bool:
        # Asked in the actor: the attribute may be a method, which does not travel.
        return all(self.ray.get([actor.has.remote(attr_name) for actor in self.actors]))

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self.ray.get([self.actors[i].get.remote(attr_name) for i in self._get_indices(indices)])

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self.ray.get([self.actors[i].set.remote(attr_name, value) for i in self._get_indices(indices)])

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        return self.ray.get(
            [
                self.actors[i].call.remote(method_name, method_args, method_kwargs)
                for i in self._get_indices(indices)
            ]
        )

    def env_is_wrapped(
        self, wrapper_class: type[gymnasium.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        return self.ray.get(
            [self.actors[i].is_wrapped.remote(wrapper_class) for i in self._get_indices(indices)]
        )

    def get_images(self) -> Sequence[np.ndarray | None]:
        return [None for _ in self.actors]
