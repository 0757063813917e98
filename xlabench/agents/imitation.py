"""Warm start from XLA's own order: behaviour cloning of the default pipeline's effective passes.

For each training graph the demonstration is XLA's default pipeline's order, then *stop*. Observing
XLA's order (the default since v3.0), it is the passes an episode plays taking `xla_next` at every
state (`followed_order`); otherwise the passes that changed the module in one compile of the pipeline
(`expert_order`; 3 passes on a small ResNet, 12 on a bf16 ResNet step, 21 on a bf16 GPT-2 one), as
the environment's actions; a pass whose requirement did nothing gets it first anyway. It is
played in the environment, so every observation and mask is one a rollout would see. The policy's
masked action distribution is fitted to it by cross-entropy. Then DAgger (`aggregate`): the cloned
policy is rolled out, every state it visits is labelled with what XLA's order says to do from there
(`followed_label` when observed: off the demonstrated path, what `xla_next` shows; otherwise
`expert_action`), and the policy is fitted again on all of it -- so one wrong step does not leave
it where it was never shown what to do. Not observing the order, optionally (`try_share`), the
passes most training orders share are tried in every order (`with_tries`): the policy cannot see
whether one would change the module, so it is shown trying it. PPO then improves on it with the
true reward. Without this start, PPO from scratch must discover that expanders and normalizers come
before the simplifications they feed, from a reward that only arrives at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from xlabench.agents.expert import (
    expert_action,
    expert_order,
    following_dce,
    following_where_free,
    improve_order,
    passes_worth_trying,
    previous_start,
    with_single_runs,
    with_tries,
)
from xlabench.env import PassOrderingEnv
from xlabench.env.environment_config import EnvironmentConfig
from xlabench.errors import CompilerError
from xlabench.graphs import resolve_graphs
from xlabench.graphs.suite_definition import PROGRAM_KEYS
from xlabench.policies.networks import SUPPORT_KEYS, XLA_NEXT_KEY
from xlabench.xla import PassDriver
from xlabench.xla.compilers.pass_catalogue import base_pass


@dataclass
class Demonstrations:
    """Observations (a dict of stacked arrays), action masks, the expert's actions, and returns."""

    observations: dict[str, np.ndarray]
    masks: np.ndarray
    actions: np.ndarray
    graphs: int
    # The discounted return from each state of the episode it was seen in: the value function's target.
    returns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.float32))
    # Per graph, the expert's order: XLA's effective passes as action names (what `expert_action` follows).
    orders: dict[str, list[str]] = field(default_factory=dict)
    # Per graph, R of XLA's order and of the order after `improve_order` (when it ran).
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The passes tried in every order (`with_tries`).
    tries: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.actions)

    def extend(self, more: Demonstrations) -> Demonstrations:
        """These demonstrations and more (DAgger's aggregation)."""
        return Demonstrations(
            {
                key: np.concatenate([value, more.observations[key]])
                for key, value in self.observations.items()
            },
            np.concatenate([self.masks, more.masks]),
            np.concatenate([self.actions, more.actions]),
            self.graphs,
            np.concatenate([self.returns, more.returns]),
            self.orders,
            self.counts,
            self.tries,
        )


Step = tuple[dict[str, np.ndarray], np.ndarray, int]

# How the demonstrations and DAgger's labels are made, by whether XLA's order is observed: a resumed
# run (`xlabench.agents.retrain_checkpoint`) trained by another scheme is not the same run. Change on change.
EXPERT = {
    True: "followed xla_next; DAgger off the path: xla_next",
    False: "effective order, tries (try_share), single runs",
}


def demonstrations(
    graphs: str,
    environment: EnvironmentConfig,
    driver: PassDriver,
    *,
    workers: int = 2,
    per_family: int | None = None,
    group_by: str = "family",
    improve_budget: int = 0,
    gamma: float = 0.99,
    try_share: float | None = None,
    insertions: Sequence[str] = (),
    starts: Mapping[str, Sequence[str]] | None = None,
) -> Demonstrations:
    """Play XLA's effective order on the graphs of the SPEC; record what a policy would see.

    With `improve_budget`, the order is first improved (`improve_order`, at most that many compiler
    calls per graph, with the passes of XLA's order as the ones to append; the single runs of the
    passes of `insertions` that XLA iterates there may also be inserted after its float
    normalization). With `per_family`, only that many of each family's (or, `group_by="kind"`, each
    program kind's) graphs, the smallest. With `try_share`, the passes in that share of the orders
    are tried in every order (`with_tries`), unless that raises the graph's count. With `starts` (the
    version before's sequences, by graph), a graph starts from its sequence where that counts below
    XLA's order (`previous_start`), and such a graph is demonstrated even if not one of the smallest.
    """
    from tqdm import tqdm

    starts = starts or {}
    # A graph of `starts` beyond the smallest of its kind is demonstrated only where the version
    # before beat XLA's order on it.
    smallest = {graph.name for graph in warm_start_graphs(graphs, per_family, group_by)}
    selected = warm_start_graphs(graphs, per_family, group_by, also=starts)
    orders: dict[str, list[str]] = {}
    counts: dict[str, tuple[int, int]] = {}

    # Observing XLA's order, the expert follows `xla_next` in the environment: the demonstration then
    # departs from what the policy sees only where `improve_order` found better, not in the forms
    # (single runs) or tries the unobserved expert adds.
    follows = environment.observe_xla_order

    def expert(graph_name: str) -> None:
        env = _environment(selected, environment, driver)
        observation, _ = env.reset(seed=0, options={"graph": graph_name})
        order = followed_order(env, observation) if follows else expert_order(driver, env)
        start = env.graph_start(graph_name).module
        xla_count = None
        if graph_name in starts:
            xla_count = driver.fair_op_count(env.module, order)
            stored = list(starts[graph_name])
            previous = previous_start(driver, start, order, xla_count, stored, env)
            if previous is order and graph_name not in smallest:
                return
            if previous is stored:  # the sequence itself: XLA's next pass taken wherever it costs nothing
                fresh = _environment(selected, environment, driver)
                previous = following_where_free(driver, fresh, graph_name, stored)
            order = previous
        if improve_budget > 0:
            if xla_count is None:
                xla_count = driver.fair_op_count(env.module, order)
            candidates = sorted(set(order))
            # Single runs of the passes XLA iterates here, tried ahead of its loops: on bf16 training
            # graphs one algsimp run before float-normalization ends ~1% below XLA's count.
            iterated = {base_pass(name) for name in order if base_pass(name) != name}
            inserted = sorted(iterated & set(insertions) & set(env.actions))
            order, count = improve_order(
                driver, start, order, candidates, improve_budget, env.max_steps - 1, inserted
            )
            counts[graph_name] = (xla_count, count)
        if follows:
            order = following_dce(_environment(selected, environment, driver), graph_name, order)
        orders[graph_name] = order

    names = [graph.name for graph in selected]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as executor:
        list(
            tqdm(executor.map(expert, names), desc="warm start: XLA's orders", total=len(names), unit="graph")
        )
    selected = [graph for graph in selected if graph.name in orders]
    names = [graph.name for graph in selected]
    tries: list[str] = []
    if try_share is not None and not follows:
        tries = passes_worth_trying(orders, try_share)
        env = _environment(selected, environment, driver)

        def count(graph_name: str, order: list[str]) -> int:
            module = env.graph_start(graph_name).module
            for name in order:
                module, _ = driver.apply_action(module, name)
            return driver.fair_op_count(module, order)

        for graph_name in names:
            tried = with_tries(orders[graph_name], tries, env.actions, driver.catalogue)
            if tried == orders[graph_name]:
                continue
            try:
                if count(graph_name, tried) <= count(graph_name, orders[graph_name]):
                    orders[graph_name] = tried
            except CompilerError:  # a tried pass XLA rejects here: keep the order as it was
                pass
    if not follows:
        orders = with_single_runs(orders, _environment(selected, environment, driver))

    def play(graph_name: str) -> tuple[list[Step], float]:
        # A fresh environment: one that played the order has learnt which passes change nothing where.
        env = _environment(selected, environment, driver)
        observation, _ = env.reset(seed=0, options={"graph": graph_name})
        return _play(env, observation, orders[graph_name], act=None)

    data = _collect(play, selected, workers, orders, "warm start: demonstrations", gamma)
    data.counts = counts
    data.tries = tries
    return data


def followed_order(env: PassOrderingEnv, observation: dict[str, np.ndarray]) -> list[str]:
    """The passes an episode plays taking `xla_next` until XLA's order is done (or the step cap)."""
    done = False
    while not done:
        action = int(np.argmax(observation["xla_next"]))
        if action == env.stop_action:
            break
        observation, _, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    return list(env.sequence)[: env.max_steps - 1]  # room for the stop


def aggregate(
    policy: Any,
    data: Demonstrations,
    graphs: str,
    environment: EnvironmentConfig,
    driver: PassDriver,
    *,
    workers: int = 2,
    per_family: int | None = None,
    group_by: str = "family",
    gamma: float = 0.99,
) -> tuple[Demonstrations, dict[str, float]]:
    """One DAgger round: roll the policy out, label every state it visits with `expert_action`
    (observing XLA's order, `followed_label`).

    Cloning sees only states on XLA's own path; one wrong step puts the policy where it has never
    been shown what to do. This shows it, and returns how often it already agreed with the expert.
    """
    chosen = warm_start_graphs(graphs, per_family, group_by, also=data.orders)
    selected = [graph for graph in chosen if graph.name in data.orders]

    # stable-baselines3 keeps the last distribution on the policy object: two rollout threads acting at
    # once could read each other's logits, and the policy's choices -- so the weights DAgger ends
    # with -- would depend on thread timing.
    lock = threading.Lock()

    def act(observation: dict[str, np.ndarray], mask: np.ndarray) -> int:
        import torch

        with lock, torch.no_grad():
            tensors = {key: torch.as_tensor(value[None]) for key, value in observation.items()}
            logits = _logits(policy, tensors)[0].numpy()
        return int(np.argmax(np.where(mask, logits, -np.inf)))

    agreed = [0, 0]

    label = followed_label if environment.observe_xla_order else None

    def play(graph_name: str) -> tuple[list[Step], float]:
        env = _environment(selected, environment, driver)
        observation, _ = env.reset(seed=0, options={"graph": graph_name})
        return _play(env, observation, data.orders[graph_name], act=act, agreed=agreed, label=label)

    policy.set_training_mode(False)
    added = _collect(play, selected, workers, data.orders, "warm start: DAgger round", gamma)
    return data.extend(added), {"visited": len(added), "agreement": agreed[0] / max(1, agreed[1])}


# What makes two graphs of a family different programs, where the manifest's config has it: the
# control-flow program, the TensorFlow model, the recurrent cell, inference or training, the dtype.
KIND_KEYS: tuple[str, ...] = (*PROGRAM_KEYS, "dtype")  # a program, in one precision


def program_kind(graph: Any) -> tuple[str, ...]:
    """A graph's family and the config values that make it another program (`KIND_KEYS`)."""
    return (graph.family, *(str(graph.config.get(key)) for key in KIND_KEYS))


def warm_start_graphs(
    graphs: str, per_family: int | None, group_by: str = "family", also: Iterable[str] = ()
) -> list[Any]:
    """The graphs of a SPEC the warm start learns from: all, or the `per_family` smallest of each
    family (`group_by="family"`) or of each program kind (`"kind"`, `program_kind`), and those of
    the SPEC named in `also`."""
    if group_by not in ("family", "kind"):
        raise ValueError(f"{group_by}: group the warm start's graphs by family or kind")
    every = sorted(resolve_graphs(graphs), key=lambda graph: (graph.family, graph.instruction_count))
    if per_family is None:
        return every
    key = (lambda graph: graph.family) if group_by == "family" else program_kind
    groups: dict[Any, list[Any]] = {}
    for graph in every:
        groups.setdefault(key(graph), []).append(graph)
    chosen = {graph.name for group in groups.values() for graph in group[:per_family]} | set(also)
    selected = [graph for group in groups.values() for graph in group if graph.name in chosen]
    return selected


def _environment(graphs: list[Any], environment: EnvironmentConfig, driver: PassDriver) -> Any:

    return PassOrderingEnv(graphs=graphs, driver=driver, **environment.to_json())


def followed_label(
    order: list[str],
    sequence: list[str],
    observation: dict[str, np.ndarray],
    mask: np.ndarray,
    actions: list[str],
) -> int:
    """DAgger's label when the expert follows `xla_next`: the order's next pass while the episode is
    on the order's path, and off it what the policy sees -- `xla_next` (XLA's order from there).

    `expert_action` matches passes by name: off the path (a single run where the order iterates, a
    pass that changed nothing) it would send the policy back to a pass XLA's order no longer shows.
    """
    if sequence == order[: len(sequence)]:
        return expert_action(order, sequence, mask, actions)
    shown = int(np.argmax(observation["xla_next"]))
    return shown if shown == len(actions) or mask[shown] else expert_action(order, sequence, mask, actions)


def _play(
    env: Any,
    observation: dict[str, np.ndarray],
    order: list[str],
    act: Any,
    agreed: list[int] | None = None,
    label: Any = None,
) -> tuple[list[Step], float]:
    """Label each state with the expert's action (`label`, default `expert_action`); move by `act`
    (the policy), or by the expert's.

    Returns the labelled states and the episode's reward: it all comes at the end (the count).
    """
    steps: list[Step] = []
    while True:
        mask = env.action_masks()
        if label is None:
            expert = expert_action(order, env.sequence, mask, env.actions)
        else:
            expert = label(order, env.sequence, observation, mask, env.actions)
        steps.append((observation, mask, expert))
        chosen = expert if act is None else act(observation, mask)
        if agreed is not None:
            agreed[0] += int(chosen == expert)
            agreed[1] += 1
        observation, reward, terminated, truncated, _ = env.step(chosen)
        if terminated or truncated:
            return steps, float(reward)


def _collect(
    play: Any, selected: list[Any], workers: int, orders: dict[str, list[str]], label: str, gamma: float
) -> Demonstrations:
    from tqdm import tqdm

    names = [graph.name for graph in selected]
    steps: list[Step] = []
    returns: list[float] = []
    with ThreadPoolExecutor(max_workers=max(1, workers)) as executor:
        for episode, reward in tqdm(executor.map(play, names), desc=label, total=len(names), unit="graph"):
            steps += episode
            # The only reward comes with the last step: from step t it is discounted T-1-t times.
            returns += [gamma ** (len(episode) - 1 - t) * reward for t in range(len(episode))]
    return Demonstrations(
        observations={key: np.stack([step[0][key] for step in steps]) for key in steps[0][0]},
        masks=np.stack([step[1] for step in steps]),
        actions=np.array([step[2] for step in steps]),
        graphs=len(names),
        returns=np.array(returns, dtype=np.float32),
        orders=orders,
    )


def with_followed_copies(data: Demonstrations, copies: int, seed: int) -> Demonstrations:
    """The demonstrations and, for each state where the expert took XLA's next pass, `copies` copies
    in which XLA's next pass is another pass the state allows, and the label is that pass.

    Cloning shows as XLA's next move only the passes of the training graphs' orders, and drives the
    logit of every other pass down everywhere: on a user's module whose order has one
    (`simplify-conditional` on a TensorFlow cluster, `convolution-group-converter` on torch-xla's
    MobileNetV2), a policy then refuses XLA's next pass. The copies make following `xla_next` one
    rule for every pass; the states where the expert departs from XLA's order are left as they are.
    """
    if copies <= 0 or XLA_NEXT_KEY not in data.observations or not len(data):
        return data
    following = data.observations[XLA_NEXT_KEY]
    stop = following.shape[1] - 1
    generator = np.random.default_rng(seed)
    rows: list[int] = []
    labels: list[int] = []
    for index in np.flatnonzero((following.argmax(axis=1) == data.actions) & (data.actions != stop)):
        others = np.flatnonzero(data.masks[index][:stop])
        others = others[others != data.actions[index]]
        if len(others):
            chosen = generator.choice(others, size=copies)
            rows += [int(index)] * copies
            labels += [int(action) for action in chosen]
    if not rows:
        return data
    observations = {key: value[rows].copy() for key, value in data.observations.items()}
    observations[XLA_NEXT_KEY][:] = 0.0
    observations[XLA_NEXT_KEY][np.arange(len(rows)), labels] = 1.0
    copied = Demonstrations(
        observations,
        data.masks[rows],
        np.asarray(labels, dtype=data.actions.dtype),
        data.graphs,
        data.returns[rows],
    )
    return data.extend(copied)


def behaviour_cloning(
    policy: Any,
    data: Demonstrations,
    epochs: int,
    learning_rate: float,
    batch_size: int,
    seed: int,
    follow_copies: int = 0,
) -> dict[str, float]:
    """Fit an actor-critic policy's masked action distribution to the demonstrations, and its value
    function to their returns (so reinforcement learning starts from a critic that fits the actor);
    with `follow_copies`, also to `with_followed_copies` of them (the accuracy is on the demonstrations)."""
    import torch

    generator = np.random.default_rng(seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    fitted = with_followed_copies(data, follow_copies, seed)
    if hasattr(policy, "show_departures") and XLA_NEXT_KEY in fitted.observations:
        # Every demonstrated (XLA's next, action) pair, and no other departure (`FollowsXlaOrderPolicy`).
        support = [fitted.observations[key].reshape(len(fitted), -1) for key in SUPPORT_KEYS]
        policy.show_departures(
            fitted.observations[XLA_NEXT_KEY], fitted.actions, np.concatenate(support, axis=1)
        )
    observations = {key: torch.as_tensor(value) for key, value in fitted.observations.items()}
    masks = torch.as_tensor(fitted.masks)
    actions = torch.as_tensor(fitted.actions)
    returns = torch.as_tensor(fitted.returns)
    policy.set_training_mode(True)
    loss = value_loss = torch.tensor(0.0)
    for _ in range(epochs):
        order = generator.permutation(len(fitted))
        for start in range(0, len(order), batch_size):
            batch = torch.as_tensor(order[start : start + batch_size])
            logits = _logits(policy, {key: value[batch] for key, value in observations.items()})
            logits = logits.masked_fill(~masks[batch], -1e8)
            loss = torch.nn.functional.cross_entropy(logits, actions[batch])
            values = policy.predict_values({key: value[batch] for key, value in observations.items()})
            value_loss = torch.nn.functional.mse_loss(values.flatten(), returns[batch])
            optimizer.zero_grad()
            (loss + value_loss).backward()
            optimizer.step()
    policy.set_training_mode(False)
    with torch.no_grad():
        shown = {key: torch.as_tensor(value) for key, value in data.observations.items()}
        logits = _logits(policy, shown).masked_fill(~torch.as_tensor(data.masks), -1e8)
        accuracy = float((logits.argmax(dim=1) == torch.as_tensor(data.actions)).float().mean())
    return {
        "demonstrations": len(data),
        "followed_copies": len(fitted) - len(data),
        "graphs": data.graphs,
        "loss": float(loss.detach()),
        "value_loss": float(value_loss.detach()),
        "accuracy": accuracy,
    }


def _logits(policy: Any, observations: dict[str, Any]) -> Any:
    # The action distribution's log-probabilities (as logits): what the policy acts on, whether its
    # actor and critic share one feature extractor or not (ppo-value).
    return policy.get_distribution(observations).distribution.logits
