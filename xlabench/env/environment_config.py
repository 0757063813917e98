"""The settings of a pass-ordering environment a policy is trained and served in.

A policy's metadata stores them (`"environment"`); a rollout, `xlabench interactive` and retraining
read them back from there, so a policy always acts in the environment it learnt in.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from xlabench.errors import UserInputError


@dataclass(frozen=True)
class EnvironmentConfig:
    """Keyword arguments of `PassOrderingEnv` that shape what a policy sees and is rewarded for.

    The defaults are the environment of the shipped policy (`general`, the version `retrain` makes),
    and the one source of the environment's defaults: `PassOrderingEnv` and
    `gymnasium.make("xlabench/PassOrdering-v0")` take theirs from here (docs/driver.md, "The
    environment's defaults"). Why each is what it is: docs/design.md.
    """

    # Fixed-point variants and single runs of each pass (xlabench.xla.compilers.pass_catalogue).
    action_set: str = "fixed-point-and-single"
    # XLA's own order on a 3-layer T5 bf16 step changes the module 56 times (reshape-mover alone
    # ~45), and past XLA's order a policy may go on: 128 leaves room for both.
    max_steps: int = 128
    error_penalty: float = 0.01
    # Counting only at the episode's end makes a step ~16x cheaper; the return is the same.
    count_every_step: bool = False
    # Mask passes known to change nothing before they run.
    mask_inapplicable: bool = False
    # What the return is measured against: the raw module's count ("unoptimized", (R0 - R) / R0) or
    # XLA's default count ("default", (D - R) / D).
    reward_baseline: str = "default"
    # Show the policy where the episode stands in XLA's own order on this module (`env/xla_order.py`):
    # XLA's next pass and the share of its order done. One cached compile a module.
    observe_xla_order: bool = True
    # Taking a pass up to this many entries past XLA's next moves the cursor past it, the
    # entries between left out (0: the cursor waits at XLA's next pass, as before general@v3.0).
    xla_order_skip: int = 1

    def to_json(self) -> dict[str, Any]:
        """The metadata form: a dict of the fields."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EnvironmentConfig:
        """Read back from metadata; a key missing from an older policy's takes the value it had before
        the setting existed (`BEFORE_IT_EXISTED`), which is how that policy's environment behaved."""
        names = {field.name for field in fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise UserInputError(f"unknown environment setting {', '.join(unknown)}")
        return cls(**{**BEFORE_IT_EXISTED, **data})

    def replace(self, **changes: Any) -> EnvironmentConfig:
        """A copy with some settings changed (unknown names refused in one line)."""
        return EnvironmentConfig.from_json({**self.to_json(), **changes})


# What an environment did before each later setting existed: how a policy's metadata without the key
# is read (general@v1.0 has the first four settings only).
BEFORE_IT_EXISTED: dict[str, Any] = {
    "mask_inapplicable": False,
    "reward_baseline": "unoptimized",
    "observe_xla_order": False,
    "xla_order_skip": 0,
}
