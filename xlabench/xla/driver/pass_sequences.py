"""Sequences of passes built on one pass at a time: actions, runs to a fixed point, step lists."""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass

from xlabench.errors import CompilerError
from xlabench.xla.compilers.pass_catalogue import FIXED_POINT_LIMIT, FIXED_POINT_SUFFIX, base_pass
from xlabench.xla.driver.hlo_module import HloModule


@dataclass(frozen=True)
class Step:
    """One pass of a sequence: the module after it, or the error it gave."""

    pass_name: str
    module: HloModule | None
    seconds: float
    error: CompilerError | None = None


class PassSequences(ABC):
    """Runs of several passes over `apply_pass` and `check_pass`, which the driver provides (`PassDriver`)."""

    def __init__(self) -> None:
        # (fingerprint, pass) pairs a fixed-point run ended on: the pass's last run changed nothing there.
        self._fixed_points: set[tuple[str, str]] = set()
        self._fixed_points_lock = threading.Lock()

    @abstractmethod
    def apply_pass(self, module: HloModule, pass_name: str) -> HloModule:
        """The module after one run of `pass_name`."""

    @abstractmethod
    def check_pass(self, pass_name: str) -> None:
        """Raise UnknownPassError unless `pass_name` can be applied alone."""

    def apply_action(self, module: HloModule, action: str) -> tuple[HloModule, int]:
        """Apply an action (a pass or a "PASS:fixed-point" variant): the module, the compiler calls made."""
        if action.endswith(FIXED_POINT_SUFFIX):
            self.check_pass(action)
            return self.apply_to_fixed_point(module, base_pass(action))
        return self.apply_pass(module, action), 1

    def apply_to_fixed_point(self, module: HloModule, pass_name: str) -> tuple[HloModule, int]:
        """Apply `pass_name` until it changes nothing (FIXED_POINT_LIMIT runs at most): the module, the runs.

        Each run is one `apply_pass` (one compiler call, cached), the last the run that found nothing
        to do. A failing first run raises; a later one ends the loop there (counted as a run).
        Why not XLA's own fixed-point pipeline in one compile: reshape-mover alone in it never
        settles on XLA's in-memory module (25 iterations, the module growing each time), while through
        xlabench's canonical form between runs it mostly settles in a few
        (not on every graph: some reach the limit).
        """
        runs = 0
        current = module
        while runs < FIXED_POINT_LIMIT:
            try:
                following = self.apply_pass(current, pass_name)
            except CompilerError:
                if runs == 0:
                    raise
                return current, runs + 1  # the runs that worked stand
            runs += 1
            if following.fingerprint == current.fingerprint:
                with self._fixed_points_lock:
                    self._fixed_points.add((current.fingerprint, pass_name))
                break
            current = following
        return current, runs

    def is_fixed_point(self, module: HloModule, pass_name: str) -> bool:
        """Whether a fixed-point run of `pass_name` (a base pass) ended on this module: it changes nothing."""
        with self._fixed_points_lock:
            return (module.fingerprint, pass_name) in self._fixed_points

    def apply_passes(
        self, module: HloModule, pass_names: list[str], stop_on_error: bool = True
    ) -> list[Step]:
        """Apply passes one after another; an erroring pass leaves the module as it was."""
        for pass_name in pass_names:
            self.check_pass(pass_name)
        steps: list[Step] = []
        current = module
        for pass_name in pass_names:
            started = time.perf_counter()
            try:
                current = self.apply_pass(current, pass_name)
                steps.append(Step(pass_name, current, time.perf_counter() - started))
            except CompilerError as error:
                steps.append(Step(pass_name, None, time.perf_counter() - started, error))
                if stop_on_error:
                    break
        return steps
