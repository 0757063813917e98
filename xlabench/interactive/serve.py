"""xlabench as the compiler of MLGO's interactive protocol (`xlabench interactive`).

An MLGO host (LLVM's `InteractiveModelRunner` protocol, `xlabench.interactive.protocol`) orders XLA's
passes on one graph: at each decision xlabench writes the environment's observation (the features of
`xlabench/PassOrdering-v0`, plus an `action_mask`) and waits for the host's advice, an `int64_t[1]`:
the index of an action, or -1 (or the action count) to stop. The episode is the one `xlabench eval`
rolls out for a policy (same environment settings), so its result is what eval reports for that
sequence: graph, sequence, I, D, R, vs_default, compiler calls.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from xlabench.env import PassOrderingEnv
from xlabench.env.environment_config import EnvironmentConfig
from xlabench.errors import UserInputError
from xlabench.graphs import resolve_graphs
from xlabench.interactive.protocol import (
    ChannelClosed,
    Reader,
    TensorSpec,
    header,
    json_line,
    open_fifo,
    write_all,
)
from xlabench.settings import Settings, current
from xlabench.xla import default_driver

DEFAULT_TIMEOUT = 300.0
# The environment of the shipped policies: served with these settings, a policy's advice gives the
# rollout `xlabench eval` makes.
DEFAULT_ENVIRONMENT = EnvironmentConfig()
DEFAULT_ACTION_SET = DEFAULT_ENVIRONMENT.action_set
DEFAULT_MAX_STEPS = DEFAULT_ENVIRONMENT.max_steps
ADVICE = TensorSpec("advice", (1,), "int64_t")
SCORE = TensorSpec("reward", (1,), "float")


@dataclass(frozen=True)
class EpisodeResult:
    """What an interactive episode ended with, as `xlabench eval` reports a sequence."""

    name: str
    sequence: list[str]
    I: int  # noqa: E741 -- eval's JSON key: the raw module's op count
    D: int
    R: int
    vs_default: float
    calls: int


def feature_specs(observation_space: Any, action_count: int) -> list[TensorSpec]:
    """The features of every decision: the environment's observation, in its order, and the action mask."""
    specs = [
        TensorSpec(name, tuple(space.shape), "float") for name, space in observation_space.spaces.items()
    ]
    return [*specs, TensorSpec("action_mask", (action_count,), "int64_t")]


def policy_environment(
    reference: str, settings: Settings | None = None
) -> tuple[EnvironmentConfig, list[str]]:
    """The environment a policy (NAME, NAME@vX.Y or a version directory, in the policies directory of
    `settings`, default those in effect) was made in, and its actions, from its metadata."""
    from xlabench.policies.artifact import policies_directory, read_metadata, resolve

    path = resolve(reference, policies_directory(settings or current()))
    metadata = read_metadata(path)
    environment, actions = metadata.get("environment") or {}, metadata.get("actions")
    if not isinstance(environment, dict) or not isinstance(actions, list):
        raise UserInputError(f"{path}: metadata without a readable environment or action list")
    try:
        return EnvironmentConfig.from_json(environment), [str(name) for name in actions]
    except UserInputError as error:  # made by a newer xlabench: name the policy
        raise UserInputError(f"{path}: {error}") from None


def serve_episode(
    graph_spec: str,
    channel_base: str,
    environment: EnvironmentConfig = DEFAULT_ENVIRONMENT,
    actions: list[str] | None = None,
    score: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    settings: Settings | None = None,
) -> EpisodeResult:
    """Serve one episode on one graph to the host at `channel_base`, in `environment` (with `actions`,
    a policy's own list: those this compiler lacks are masked), compiling under `settings` (default:
    those in effect); bad advice or a host gone raise UserInputError (one line)."""

    graphs = resolve_graphs(graph_spec)
    if len(graphs) != 1:
        raise UserInputError(f"{graph_spec}: names {len(graphs)} graphs; interactive takes one")
    graph = graphs[0]
    # Counted once at the end, as `rollout` counts; `score` asks for each decision's reward.
    options = {**environment.to_json(), "count_every_step": False}
    env = PassOrderingEnv(
        graphs=[graph],
        actions=actions,
        driver=default_driver(settings or current()),
        rewards=score,
        mask_missing_actions=True,
        **options,
    )
    actions = env.actions
    observation, info = env.reset(
        seed=0, options={"graph": graph.name}
    )  # I, D (and R0) before the host waits
    features = feature_specs(env.observation_space, len(actions))
    base = channel_base
    try:
        inbound = open_fifo(f"{base}.in", "r", timeout)
    except OSError as error:
        raise UserInputError(f"{base}.in: {error.strerror}") from None
    try:
        outbound = open_fifo(f"{base}.out", "w", timeout)
    except (ChannelClosed, OSError) as error:
        os.close(inbound)
        raise UserInputError(f"{base}: {error}") from None
    advice_reader = Reader(inbound, f"{base}.in", timeout)
    try:
        write_all(
            outbound, header(features, ADVICE, SCORE if score else None, actions=actions), f"{base}.out"
        )
        write_all(outbound, json_line({"context": graph.name}), f"{base}.out")
        return _episode(env, observation, info, features, advice_reader, outbound, f"{base}.out", score)
    except (ChannelClosed, _BadAdvice) as problem:
        raise UserInputError(f"interactive: {problem}") from None
    finally:
        for descriptor in (inbound, outbound):
            os.close(descriptor)


class _BadAdvice(Exception):
    """Advice the episode cannot take: outside the actions, or masked."""


def _episode(
    env: Any,
    observation: dict[str, np.ndarray],
    info: dict[str, Any],
    features: list[TensorSpec],
    advice_reader: Reader,
    outbound: int,
    name: str,
    score: bool,
) -> EpisodeResult:
    """Decisions until the host stops or the step cap; the result counted as `rollout` counts it."""
    stop = len(env.actions)
    applications, decision, done = 0, 0, False
    while not done:
        mask = env.action_masks()
        tensors = [observation[spec.name] for spec in features[:-1]] + [mask[:stop].astype(np.int64)]
        payload = b"".join(spec.encode(tensor) for spec, tensor in zip(features, tensors, strict=True))
        write_all(outbound, json_line({"observation": decision}) + payload + b"\n", name)
        advice = int(ADVICE.decode(advice_reader.exactly(ADVICE.byte_size))[0])
        if advice == -1:
            advice = stop
        if not 0 <= advice <= stop:
            raise _BadAdvice(f"advice {advice} at decision {decision} is outside -1..{stop} ({stop} actions)")
        if not mask[advice]:
            raise _BadAdvice(
                f"advice {advice} ({env.actions[advice]}) at decision {decision} is masked there"
            )
        observation, reward, terminated, truncated, info = env.step(advice)
        applications += info["calls"]
        if score:
            write_all(outbound, json_line({"outcome": decision}) + SCORE.encode([reward]) + b"\n", name)
        decision += 1
        done = terminated or truncated
    # Counted as `rollout` counts (the episode's own count may have failed: R0 would then stand there),
    # XLA's order included where the features carry it.
    op_count = env.driver.fair_op_count(env.module, env.sequence)
    return EpisodeResult(
        name=info["graph"],
        sequence=env.sequence,
        I=info["I"],
        D=info["D"],
        R=int(op_count),
        vs_default=info["D"] / int(op_count),
        calls=applications + 1 + int(env.observe_xla_order),
    )
