"""What an environment knows changes nothing: the actions it masks and the compiler calls it skips."""

from __future__ import annotations

import numpy as np

from xlabench.xla import HloModule, PassDriver
from xlabench.xla.compilers.pass_catalogue import FIXED_POINT_SUFFIX, base_pass, inapplicable


class NoOpMemory:
    """Passes seen to change nothing (or to fail) on a module, and the action mask they give."""

    def __init__(
        self,
        driver: PassDriver,
        actions: list[str],
        missing: set[int],
        mask_inapplicable: bool,
        skip_known_no_ops: bool,
    ) -> None:
        self.driver = driver
        self.actions = actions
        self.missing = missing  # actions this compiler lacks: always masked, never run
        self.mask_inapplicable = mask_inapplicable
        self.skip_known_no_ops = skip_known_no_ops
        # (module fingerprint, action) pairs known to change nothing or to fail: masked, for good.
        self.useless: set[tuple[str, int]] = set()
        # (module fingerprint, base pass) this episode saw the pass leave unchanged.
        self.unchanged: set[tuple[str, str]] = set()

    def new_episode(self) -> None:
        """Forget what this episode saw (what is useless stays known)."""
        self.unchanged = set()

    def known_no_op(self, module: HloModule, pass_name: str) -> bool:
        """Whether running the pass is known to leave `module` as it is and is skipped, so needs no
        compiler call (`skip_known_no_ops`)."""
        return self.skip_known_no_ops and self.knows_no_op(module, pass_name)

    def knows_no_op(self, module: HloModule, pass_name: str) -> bool:
        """Whether running the pass is known to leave `module` as it is, whether or not steps skip it:
        what the observation of XLA's order judges by, so that it is the same with skipping on or off."""
        if (module.fingerprint, base_pass(pass_name)) in self.unchanged:
            return True
        return inapplicable(pass_name, self.driver.features(module).histogram)

    def record_failure(self, module: HloModule, action: int) -> None:
        """The action's pass failed on `module`: never offer it there again."""
        self.useless.add((module.fingerprint, action))

    def record(self, before: HloModule, after: HloModule, action: int) -> None:
        """Remember what the action's pass did to `before`: nothing, or ending its fixed-point loop."""
        pass_name = self.actions[action]
        base = base_pass(pass_name)
        if after.fingerprint == before.fingerprint:
            self.useless.add((before.fingerprint, action))
            self.unchanged.add((before.fingerprint, base))
        elif pass_name.endswith(FIXED_POINT_SUFFIX) and self.driver.is_fixed_point(after, base):
            # The run that ended the loop found nothing to do here: any variant of the pass is useless.
            self.unchanged.add((after.fingerprint, base))
            if self.mask_inapplicable:
                variants = [index for index, name in enumerate(self.actions) if base_pass(name) == base]
                self.useless.update((after.fingerprint, index) for index in variants)

    def mask(self, module: HloModule | None, sequence: list[str]) -> np.ndarray:
        """Valid actions on `module` after `sequence`: stop, and every pass not known to be useless.

        Known useless: a pass this compiler lacks, a pass that left this very module unchanged or
        failed on it, a pass whose required predecessor is not in the sequence yet
        (`PassCatalogue.unmet_requirement`) and, with `mask_inapplicable`, a pass none of whose
        opcodes is in the module (`inapplicable`) or whose fixed-point run ended on this module.
        """
        mask = np.ones(len(self.actions) + 1, dtype=bool)
        if module is None:
            return mask
        catalogue = self.driver.catalogue
        histogram = self.driver.features(module).histogram if self.mask_inapplicable else {}
        for action, name in enumerate(self.actions):
            mask[action] = (
                action not in self.missing
                and (module.fingerprint, action) not in self.useless
                and catalogue.unmet_requirement(name, sequence) is None
                and not (self.mask_inapplicable and inapplicable(name, histogram))
            )
        return mask
