"""A stored policy, loaded and verified, choosing passes: `load_policy`, `Policy.act`, `rollout`.

A rollout is one greedy episode in the pass-ordering environment: at each step the policy's most
likely action among those the environment's mask allows, until it stops or reaches the step cap.
The module is counted once, at the end (`count_every_step=False`): a step costs one compiler call
per pass application -- one, or a fixed-point variant's every run -- whose answer carries the features
the next observation needs; no search, no lookahead. A version whose metadata says
`"rollout": {"stop": "lowest-past-xla-order"}` also counts every state it reaches once XLA's own order
is played out, and ends on the lowest of them where that is below where it stopped (`STOP_RULES`).
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from xlabench.errors import CompilerError, UserInputError
from xlabench.graphs import Graph
from xlabench.policies.artifact import (
    Artifact,
    PolicyError,
    how_made,
    load,
    observation_spec,
    read_metadata,
    resolve,
    seed_statistics_line,
)
from xlabench.search import SearchResult
from xlabench.xla import PassDriver

# Where a rollout ends. "policy": where the policy stops. "lowest-past-xla-order": past XLA's own order
# (its next pass is *stop*), each state is counted and the episode ends on the lowest, where that
# is below the policy's stop. What a policy plays past XLA's order is its own search for a better
# count: on a module where that search does not pay off, it need not cost (docs/design.md, "The stop").
LOWEST_PAST_XLA_ORDER = "lowest-past-xla-order"
STOP_MEANINGS = {
    "policy": "where the policy stops",
    LOWEST_PAST_XLA_ORDER: "where the policy stops, or past XLA's order on the lowest count reached",
}
STOP_RULES = tuple(STOP_MEANINGS)


class Policy:
    """A verified policy version and its network (rebuilt from metadata; weights from safetensors)."""

    def __init__(self, artifact: Artifact) -> None:
        import torch
        from gymnasium import spaces

        from xlabench.env.environment_config import EnvironmentConfig
        from xlabench.env.observation import observation_space
        from xlabench.policies.networks import NoOptimizer, policy_class, policy_kwargs, use_torch_threads

        use_torch_threads()
        self.artifact = artifact
        metadata = artifact.metadata
        self.actions: list[str] = list(metadata["actions"])
        try:
            environment = EnvironmentConfig.from_json(metadata["environment"])
        except UserInputError as error:  # a policy made by a newer xlabench: name the policy
            raise PolicyError(f"{artifact.path}: {error}") from None
        self.environment = environment  # the settings it was trained in: `PassOrderingEnv(**...to_json())`
        self.max_steps = environment.max_steps
        self.mask_inapplicable = environment.mask_inapplicable
        self.observe_xla_order = environment.observe_xla_order
        self.xla_order_skip = environment.xla_order_skip
        if (
            not isinstance(self.xla_order_skip, int)
            or isinstance(self.xla_order_skip, bool)
            or self.xla_order_skip < 0
        ):
            raise PolicyError(
                f"{artifact.path}: environment setting xla_order_skip must be a whole number >= 0, "
                f"not {self.xla_order_skip!r}"
            )
        self.algorithm = str(metadata["algorithm"])
        self.stop_rule = str((metadata.get("rollout") or {}).get("stop", "policy"))
        if self.stop_rule not in STOP_RULES:
            raise PolicyError(
                f"{artifact.path}: unknown rollout stop {self.stop_rule!r} (known: {', '.join(STOP_RULES)})"
            )
        hyperparameters = metadata["hyperparameters"]
        # Made with the direct path from XLA's next pass to the logits (`FollowsXlaOrderPolicy`)?
        follows = "follow_weight" in artifact.tensors
        self.network = policy_class(self.algorithm, follows_xla_order=follows)(
            observation_space(len(self.actions), self.observe_xla_order),
            spaces.Discrete(len(self.actions) + 1),
            lambda _: 0.0,
            **policy_kwargs(hyperparameters["net_arch"], hyperparameters["activation"]),
            optimizer_class=NoOptimizer,  # rolled out, never trained
        )
        tensors = dict(artifact.tensors)
        # Made before departures (or their spans) were kept: unconstrained there, as it was made.
        for name in ("departures", "departure_low", "departure_high"):
            if follows and name not in tensors:
                tensors[name] = getattr(self.network, name)
        try:
            self.network.load_state_dict(tensors, strict=True)
        except RuntimeError as error:
            first = str(error).strip().splitlines()[0]
            raise PolicyError(
                f"{artifact.path}: weights do not fit a {self.algorithm} network: {first}"
            ) from None
        self.network.set_training_mode(False)
        self._torch = torch
        # stable-baselines3's distribution objects keep the last logits on the network: two threads
        # (`xlabench eval --workers 2` rolls out two graphs at once) would read each other's.
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        """name@vX.Y."""
        return self.artifact.label

    def action_match(self, driver: PassDriver) -> ActionMatch:
        """The policy's actions the driver's compiler lacks, and the compiler's the policy does not know."""
        metadata = self.artifact.metadata
        offered = driver.catalogue.action_passes(metadata.get("environment", {}).get("action_set", "all"))
        return ActionMatch(
            policy=self.label,
            trained_jaxlib=str(metadata.get("jaxlib_version")),
            jaxlib=driver.jaxlib_version,
            masked=tuple(name for name in self.actions if not driver.has_pass(name)),
            not_offered=tuple(name for name in offered if name not in self.actions),
        )

    def act(self, observation: dict[str, np.ndarray], mask: np.ndarray) -> int:
        """The most likely allowed action (deterministic)."""
        tensor, _ = self.network.obs_to_tensor(observation)
        with self._lock, self._torch.no_grad():
            if self.algorithm == "dqn":
                scores = self.network.q_net(tensor)
            else:
                scores = self.network.get_distribution(tensor).distribution.logits
        values = scores[0].numpy().astype(np.float64)
        values[~np.asarray(mask, dtype=bool)] = -np.inf
        return int(np.argmax(values))


@dataclass(frozen=True)
class ActionMatch:
    """How a policy's actions meet one compiler's, matched by pass name."""

    policy: str
    trained_jaxlib: str
    jaxlib: str
    masked: tuple[str, ...]  # the policy's actions this compiler lacks: never chosen
    not_offered: tuple[str, ...]  # this compiler's actions the policy was not made with

    @property
    def changed(self) -> bool:
        """Whether the policy meets another compiler, or another action list, than it was made with."""
        return self.trained_jaxlib != self.jaxlib or bool(self.masked or self.not_offered)

    def note(self) -> str:
        """One line for a report: what rolling out on this compiler changes for the policy."""
        parts = [f"{self.policy} (made on jaxlib {self.trained_jaxlib}) on jaxlib {self.jaxlib}"]
        parts.append(f"masked, the compiler lacks them: {', '.join(self.masked) or 'none'}")
        # A pass a release adds is orderable (the catalogue's simplification table names existing
        # passes only), so the required-only pipeline still runs it after the policy's sequence.
        parts.append(f"not offered, left to XLA's required passes: {', '.join(self.not_offered) or 'none'}")
        return "; ".join(parts)


def load_policy(reference: str, driver: PassDriver | None = None, root: Path | None = None) -> Policy:
    """Load NAME, NAME@vX.Y or a version directory (of `root`, default the policies directory).

    `driver` is accepted for callers that name the compiler it will roll out on; loading does not
    depend on it (the compiler is `rollout`'s and `Policy.action_match`'s argument).

    Made on another release, or with another action list, it keeps its own actions: those this
    compiler lacks are masked, those it adds are not offered (`Policy.action_match`). Refused, in one
    line, is only what cannot be served: a corrupt file, or observations its network cannot take.
    """
    from xlabench.env.environment_config import EnvironmentConfig
    from xlabench.env.observation import observation_space

    metadata = read_metadata(resolve(reference, root))
    try:
        observes = EnvironmentConfig.from_json(metadata.get("environment") or {}).observe_xla_order
    except UserInputError as error:  # a policy made by a newer xlabench: name the policy
        raise PolicyError(f"{resolve(reference, root)}: {error}") from None
    spec = observation_spec(observation_space(len(metadata.get("actions") or []), observes))
    return Policy(load(reference, spec, root))


def rollout(policy: Policy, driver: PassDriver, graph: Graph) -> SearchResult:
    """One greedy episode of `policy` on `graph`; calls = the pass applications (a step's one, a
    fixed-point variant's runs) + 1 count, + 1 for XLA's order when the policy observes it, + 1 a
    state counted past XLA's order (`STOP_RULES`)."""
    from xlabench.env import PassOrderingEnv

    env = PassOrderingEnv(
        graphs=[graph],
        actions=policy.actions,
        max_steps=policy.max_steps,
        driver=driver,
        mask_inapplicable=policy.mask_inapplicable,
        count_every_step=False,
        rewards=False,  # greedy: R at the end is all that counts, R0 is never needed
        mask_missing_actions=True,  # made on another release: what this compiler lacks is masked
        observe_xla_order=policy.observe_xla_order,
        xla_order_skip=policy.xla_order_skip,
    )
    observation, info = env.reset(seed=0, options={"graph": graph.name})
    started = time.perf_counter()
    applications, done = 0, False
    counts_past_order = policy.stop_rule == LOWEST_PAST_XLA_ORDER and policy.observe_xla_order
    past_order: list[tuple[int, int, Any]] = []  # (R, steps played, module) of each state counted
    while not done:
        action = policy.act(observation, env.action_masks())
        observation, _, terminated, truncated, info = env.step(action)
        applications += info["calls"]
        done = terminated or truncated
        if counts_past_order and not done and _order_played_out(observation, len(policy.actions)):
            # XLA's required passes failing on a state: it cannot be where the episode ends.
            with contextlib.suppress(CompilerError):
                count = driver.fair_op_count(env.module, env.sequence)
                past_order.append((count, len(env.sequence), env.module))
    # No count when XLA's required passes fail on the result: counting again raises that error.
    op_count = (
        info["op_count"] if info["op_count"] is not None else driver.fair_op_count(env.module, env.sequence)
    )
    sequence, module = list(env.sequence), env.module
    # Stopped on a state it counted past XLA's order: the final count is that count, not a second call.
    recounted = any(steps == len(sequence) for _, steps, _ in past_order)
    if past_order:
        lowest = min(past_order, key=lambda state: (state[0], state[1]))
        if lowest[0] < op_count:
            op_count, sequence, module = lowest[0], sequence[: lowest[1]], lowest[2]
    return SearchResult(
        strategy=policy.label,
        sequence=sequence,
        op_count=int(op_count),
        calls=applications + 1 + int(policy.observe_xla_order) + len(past_order) - int(recounted),
        seconds=time.perf_counter() - started,
        applied=sequence,
        module=module,
    )


def _order_played_out(observation: dict[str, np.ndarray], actions: int) -> bool:
    """Whether XLA's next pass, as the observation shows it, is *stop*: its order is played out."""
    return int(np.argmax(observation["xla_next"])) == actions


def made_on(metadata: dict[str, Any]) -> str:
    """The compiler a version was made with: its name, kind, options and build when recorded (versions
    made before compilers had names: their jaxlib)."""
    record = metadata.get("compiler")
    if not isinstance(record, dict):
        return f"jaxlib {metadata.get('jaxlib_version')}"
    options = f", {' '.join(record.get('xla_flags') or [])}" if record.get("xla_flags") else ""
    kind, jaxlib, build = record.get("kind"), record.get("jaxlib"), record.get("build")
    return f"{record.get('name')} ({kind}, jaxlib {jaxlib}{options}, build {build})"


def describe(metadata: dict[str, Any]) -> str:
    """Several lines about a version, for `xlabench policies show`."""
    training, environment = metadata.get("training", {}), metadata.get("environment", {})
    stop_rule = (metadata.get("rollout") or {}).get("stop", "policy")
    catalogue = str(metadata.get("catalogue_sha256"))[:12]
    lines = [
        f"{metadata['name']}@{metadata['version']}  created {metadata.get('created')}",
        f"  algorithm   {how_made(metadata)}  seed {metadata.get('seed')}",
        f"  trained on  {training.get('graphs')}: {training.get('steps')} steps, "
        f"{training.get('episodes')} episodes, {training.get('seconds', 0) / 60:.1f} min",
        f"  compiler    {made_on(metadata)}, catalogue {catalogue}",
        f"  actions     {len(metadata.get('actions', []))} ({environment.get('action_set')}), "
        f"max {environment.get('max_steps')} steps",
        f"  weights     sha256 {str(metadata.get('weights_sha256'))[:16]}...",
        f"  rollout     stops {stop_rule}: {STOP_MEANINGS.get(stop_rule, 'unknown')}",
    ]
    if metadata.get("seed_statistics"):
        seeds = seed_statistics_line(metadata["seed_statistics"])
        lines.append(f"  selected on {metadata.get('selected_on')}: {seeds}")
    for split, summary in metadata.get("eval", {}).items():
        worst = summary.get("worst") or {}
        lines.append(
            f"  eval {split:7} geomean vs_default {summary.get('geomean_vs_default') or float('nan'):.4f}, "
            f"worst {worst.get('name')} {worst.get('vs_default') or float('nan'):.4f}, "
            f"{summary.get('calls')} compiler calls"
        )
    return "\n".join(lines)
