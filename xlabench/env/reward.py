"""The fair count R of an episode's module and the reward its drops give."""

from __future__ import annotations

from xlabench.env.starts import GraphStart
from xlabench.errors import CompilerError, UserInputError
from xlabench.xla import HloModule, PassDriver

REWARD_BASELINES = ("unoptimized", "default")


class RewardCounter:
    """Counts the module fairly; the reward is the drop since the last count over the baseline's count.

    The baseline is what the return measures progress from and is scaled by: the raw module's fair
    count R0 ("unoptimized": the return is (R0 - R) / R0) or XLA's default count D ("default":
    (D - R) / D, 0 for a sequence that lands on XLA's count, positive only beyond it).
    """

    def __init__(self, driver: PassDriver, baseline: str, error_penalty: float, rewards: bool) -> None:
        if baseline not in REWARD_BASELINES:
            choices = ", ".join(REWARD_BASELINES)
            raise UserInputError(f"{baseline}: unknown reward baseline (choose {choices})")
        self.driver = driver
        self.baseline = baseline
        self.error_penalty = error_penalty
        self.rewards = rewards  # without rewards every reward is 0 (R0 is never counted)
        self.fair_count: int | None = 0  # R at the last count (R0 at the start)
        self._reference: int | None = 0
        self._scale = 1

    def start(self, start: GraphStart) -> None:
        """A new episode from `start`: R is R0 until the first count."""
        self.fair_count = start.unoptimized_op_count
        if self.baseline == "default":
            self._reference = self._scale = start.default_op_count
        else:
            self._reference = start.unoptimized_op_count
            self._scale = start.unoptimized_op_count or 1

    def count(self, module: HloModule, sequence: list[str]) -> float:
        """Count `module` (the result of `sequence`); the reward for the drop since the last count."""
        try:
            fair_count = self.driver.fair_op_count(module, sequence)
        except CompilerError:  # XLA's required passes fail on this sequence's module
            return -self.error_penalty if self.rewards else 0.0
        previous, self.fair_count, self._reference = self._reference, fair_count, fair_count
        if not self.rewards:
            return 0.0
        assert previous is not None
        return (previous - fair_count) / self._scale
