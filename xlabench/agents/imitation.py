"""Warm start from XLA's own order: behaviour cloning of the default pipeline's effective passes.

For each training graph the demonstration is XLA's default pipeline replayed one pass at a time
(`replay_default_pipeline`), keeping only the applications that changed the module
(`Replay.effective`: 3 passes on a small ResNet, 11 on a GPT-2 f32 step, 21 on a bf16 one), as the
environment's actions, then *stop*; a pass whose requirement did nothing gets it first anyway. It is
played in the environment, so every observation and mask is one a rollout would see. The policy's
masked action distribution is fitted to it by cross-entropy; PPO then improves on it with the true
reward. Without this start, PPO from scratch must discover that expanders and normalizers come
before the simplifications they feed from a reward that only arrives at the end.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlabench.xla import PassDriver
from xlabench.xla.replay import replay_default_pipeline


@dataclass
class Demonstrations:
    """Observations (a dict of stacked arrays), action masks and the expert's actions."""

    observations: dict[str, np.ndarray]
    masks: np.ndarray
    actions: np.ndarray
    graphs: int

    def __len__(self) -> int:
        return len(self.actions)


def demonstrations(
    graphs: str,
    environment: dict[str, Any],
    driver: PassDriver,
    workers: int = 2,
    per_family: int | None = None,
) -> Demonstrations:
    """Play XLA's effective order on the graphs of the SPEC; record what a policy would see.

    With `per_family`, only that many of each family's graphs, the smallest: a replay applies every
    pass of the pipeline (~170 compiles), so replaying a whole split costs hours.
    """
    from xlabench.env import PassOrderingEnv
    from xlabench.graphs import resolve_graphs

    selected = sorted(resolve_graphs(graphs), key=lambda graph: (graph.family, graph.instruction_count))
    if per_family is not None:
        by_family: dict[str, list[Any]] = {}
        for graph in selected:
            by_family.setdefault(graph.family, []).append(graph)
        selected = [graph for family in by_family.values() for graph in family[:per_family]]

    def play(graph_name: str) -> list[tuple[dict[str, np.ndarray], np.ndarray, int]]:
        env = PassOrderingEnv(graphs=selected, driver=driver, **environment)
        observation, _ = env.reset(seed=0, options={"graph": graph_name})
        assert env.module is not None
        replay = replay_default_pipeline(driver, env.module)
        expert: list[str] = []
        for name in (key.split("@", 1)[0] for key in replay.effective):
            # A pass whose requirement did nothing here (so is not effective) still needs it first.
            required = driver.catalogue.unmet_requirement(name, expert)
            expert += [n for n in (required, name) if n is not None and n in env.actions]
        steps = []
        for action in [*(env.actions.index(n) for n in expert[: env.max_steps - 1]), env.stop_action]:
            mask = env.action_masks()
            if not mask[action]:
                continue  # e.g. a pass the plain-name action already made a no-op here
            steps.append((observation, mask, action))
            if action != env.stop_action:
                observation, *_ = env.step(action)
        return steps

    names = [graph.name for graph in selected]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as executor:
        played = [step for steps in executor.map(play, names) for step in steps]
    keys = played[0][0].keys()
    return Demonstrations(
        observations={key: np.stack([step[0][key] for step in played]) for key in keys},
        masks=np.stack([step[1] for step in played]),
        actions=np.array([step[2] for step in played]),
        graphs=len(names),
    )


def behaviour_cloning(
    policy: Any, data: Demonstrations, epochs: int, learning_rate: float, batch_size: int, seed: int
) -> dict[str, float]:
    """Fit an actor-critic policy's masked action distribution to the demonstrations."""
    import torch

    generator = np.random.default_rng(seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    observations = {key: torch.as_tensor(value) for key, value in data.observations.items()}
    masks = torch.as_tensor(data.masks)
    actions = torch.as_tensor(data.actions)
    policy.set_training_mode(True)
    loss = torch.tensor(0.0)
    for _ in range(epochs):
        order = generator.permutation(len(data))
        for start in range(0, len(order), batch_size):
            batch = torch.as_tensor(order[start : start + batch_size])
            logits = _logits(policy, {key: value[batch] for key, value in observations.items()})
            logits = logits.masked_fill(~masks[batch], -1e8)
            loss = torch.nn.functional.cross_entropy(logits, actions[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    policy.set_training_mode(False)
    with torch.no_grad():
        logits = _logits(policy, observations).masked_fill(~masks, -1e8)
        accuracy = float((logits.argmax(dim=1) == actions).float().mean())
    return {
        "demonstrations": len(data),
        "graphs": data.graphs,
        "loss": float(loss.detach()),
        "accuracy": accuracy,
    }


def _logits(policy: Any, observations: dict[str, Any]) -> Any:
    features = policy.extract_features(observations, policy.pi_features_extractor)
    return policy.action_net(policy.mlp_extractor.forward_actor(features))
