"""The pass driver: apply single XLA passes to modules, run XLA's default pipeline, count the result.

A driver is a compiler session (`xlabench.xla.driver.compiler_session`): every compiler call goes through a
worker pool, so a crash or a hang of XLA becomes a `CompilerError` with a reproducer on disk, and the
caller goes on. Results of single passes are kept in the transition store
(`xlabench.xla.caches.transition_store`), keyed by compiler build, module fingerprint and pass; so is a loaded
text's canonical form (`xlabench.xla.driver.module_loader`), keyed by the text's sha256. Sequences of passes
(actions, fixed points, step lists) are built on `apply_pass` (`xlabench.xla.driver.pass_sequences`).

"Default" and "after a sequence" are counted at the same point: just before `layout-assignment`,
after XLA's required passes have run. `run_default_pipeline` runs the whole default pipeline to that
point; `run_required_passes` runs the same pipeline with every action pass disabled, and is what a
sequence's result goes through before it is counted.

A compiler change can be simulated by turning passes off in every compile (`disabled_passes`, or in the
settings: `XLABENCH_DISABLE_PASSES=algsimp,cse` for every driver made without its own list;
`xlabench.xla.compilers.disabled_passes`): the default pipeline, the required passes and the executables all
run without them, and applying one is a no-op.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from xlabench.errors import UnknownPassError
from xlabench.settings import Settings, current
from xlabench.xla.compilers.disabled_passes import DISABLE_PASSES_VARIABLE
from xlabench.xla.compilers.pass_catalogue import COUNTING_POINT_PASS, FIXED_POINT_SUFFIX, instance_key
from xlabench.xla.compilers.pass_names import check_applicable
from xlabench.xla.driver.compiler_session import CompilerSession
from xlabench.xla.driver.hlo_module import HloModule, use_default_driver
from xlabench.xla.driver.pass_sequences import PassSequences, Step
from xlabench.xla.shared import payloads
from xlabench.xla.shared.module_names import with_module_name

__all__ = [
    "DISABLE_PASSES_VARIABLE",
    "PassDriver",
    "Step",
    "apply_pass",
    "default_driver",
    "run_default_pipeline",
    "run_required_passes",
]

DEFAULT_PIPELINE_KEY = "@default-pipeline"
PIPELINE_CHANGES_KEY = "@pipeline-changes"
REQUIRED_PASSES_KEY = "@required-passes"
# Run where XLA runs it before a pass, to take away what each compile's import adds (`pass_runs.run_pass`).
IMPORT_CLEANUP_PASS = "dce"


class PassDriver(CompilerSession, PassSequences):
    """Applies XLA passes to modules and runs XLA's pipeline to the counting point, in a compiler session."""

    def check_pass(self, pass_name: str) -> None:
        """Raise UnknownPassError unless `pass_name` can be applied alone."""
        check_applicable(self.catalogue, pass_name)

    def has_pass(self, pass_name: str) -> bool:
        """Whether this compiler can apply `pass_name` (a pass or variant) alone (see `check_pass`)."""
        try:
            self.check_pass(pass_name)
        except UnknownPassError:
            return False
        return True

    def apply_pass(
        self,
        module: HloModule,
        pass_name: str,
        pipeline_path: tuple[str, ...] | None = None,
        occurrence: int = 1,
    ) -> HloModule:
        """The module exactly as it stands after one run of the XLA pass `pass_name`.

        By default that is the pass as XLA first adds it. XLA adds some passes several times with
        different options (convolution-group-converter, dot_decomposer, ...): `pipeline_path` (the
        pipelines around it, outermost first) and `occurrence` (1 for the first time the pass
        appears directly in the innermost of them) name one of those instances.

        A fixed-point variant ("PASS:fixed-point") is the pass run again and again until it changes
        nothing (`apply_to_fixed_point`).
        """
        self.check_pass(pass_name)
        if pass_name.endswith(FIXED_POINT_SUFFIX):
            return self.apply_action(module, pass_name)[0]
        if pass_name in self.disabled_passes:
            return module  # turned off in this (simulated) compiler: running it changes nothing
        info = self.catalogue.passes[pass_name]
        path = info.ancestors if pipeline_path is None else tuple(pipeline_path)
        key = instance_key(pass_name, path, occurrence, first=path == info.ancestors and occurrence == 1)
        disabled = self.catalogue.disabled_for_single_pass(pass_name, path)
        compiled_off = self.with_compiler_change({"disabled_passes": disabled})["disabled_passes"]
        # A compiler without dce keeps what the import adds in front of every pass, as XLA would.
        cleanup = None if IMPORT_CLEANUP_PASS in self.disabled_passes else IMPORT_CLEANUP_PASS
        return self._transition(
            module,
            key,
            "run_pass",
            pass_name=pass_name,
            disabled_passes=disabled,
            pipeline=path[-1] if path else None,
            occurrence=occurrence,
            successors=self.catalogue.successors(pass_name, path, compiled_off),
            cleanup_pass=cleanup,
        )

    def run_default_pipeline(self, module: HloModule) -> HloModule:
        """The module after XLA's default CPU pipeline, taken just before layout assignment."""
        return self._run_to_counting_point(module, DEFAULT_PIPELINE_KEY, disabled=[])

    def default_pipeline_changes(self, module: HloModule) -> list[tuple[str, str]]:
        """(pipeline, pass) of each run of XLA's default pipeline that changed the module, in order.

        One compile up to the counting point with every pass dumped: XLA's own order minus its
        no-ops, for ~1/40 of the compiles of a replay (`xlabench.xla.diagnosis.pipeline_replay`) -- but on
        XLA's in-memory module, not through xlabench's canonical form between passes.
        """
        arguments = self.with_compiler_change({"point_pass": COUNTING_POINT_PASS, "disabled_passes": []})

        def run() -> dict[str, Any]:
            answer = self.call_compiler("pipeline_changes", PIPELINE_CHANGES_KEY, module, **arguments)
            return {"changes": [list(change) for change in answer["changes"]]}

        key = self.cache_key(PIPELINE_CHANGES_KEY, "pipeline_changes", arguments)
        record = self.store.cached_or_run(module.fingerprint, key, run)  # one compile per module
        return [(pipeline, pass_name) for pipeline, pass_name in record["changes"]]

    def run_required_passes(self, module: HloModule, applied: Iterable[str] = ()) -> HloModule:
        """The module after only the required passes, taken at the same point as the default.

        `applied` holds the pass instances (`instance_key`s; a plain pass name is its first
        instance) of the sequence that produced `module`: an orderable pass whose every instance
        the sequence applied is not run a second time (see `disabled_for_required_only`).
        """
        disabled = self.catalogue.disabled_for_required_only(applied)
        return self._run_to_counting_point(module, REQUIRED_PASSES_KEY, disabled=disabled)

    def fair_op_count(self, module: HloModule, applied: Iterable[str] = ()) -> int:
        """The op count of a sequence's result: required passes applied, counted at the counting point."""
        return self.features(self.run_required_passes(module, applied)).op_count

    def full_text(self, module: HloModule) -> str:
        """The module's text with every constant in full (payloads put back): what other tools read."""
        if not payloads.has_payloads(module.text):
            return module.text
        return with_module_name(str(self.call_compiler("full_text", None, module)), module.name)

    def full_compile_seconds(self, module: HloModule) -> float:
        """Wall time of a full XLA CPU compile of the module, in a worker."""
        return float(self.call_compiler("full_compile_seconds", None, module))

    def _run_to_counting_point(self, module: HloModule, key: str, disabled: list[str]) -> HloModule:
        return self._transition(
            module,
            key,
            "run_pipeline_to_point",
            disabled_passes=disabled,
            point_pass=COUNTING_POINT_PASS,
            sibling_passes=self.catalogue.counting_point_siblings(),
            point_pipeline=self.catalogue.passes[COUNTING_POINT_PASS].ancestors[-1],
        )


_default_drivers: dict[tuple[object, ...], PassDriver] = {}
_default_driver_lock = threading.Lock()


def default_driver(settings: Settings | None = None) -> PassDriver:
    """The process-wide driver of `settings` (default: those in effect), on its default pool and cache."""
    settings = settings or current()
    key = settings.driver_key()
    with _default_driver_lock:
        if key not in _default_drivers:
            _default_drivers[key] = PassDriver(settings=settings)
        return _default_drivers[key]


use_default_driver(default_driver)  # `HloModule.from_text` and the other shortcuts run on it


def apply_pass(module: HloModule, pass_name: str) -> HloModule:
    """The module after one run of the XLA pass `pass_name` (default driver)."""
    return default_driver().apply_pass(module, pass_name)


def run_default_pipeline(module: HloModule) -> HloModule:
    """The module after XLA's default pipeline, at the counting point (default driver)."""
    return default_driver().run_default_pipeline(module)


def run_required_passes(module: HloModule) -> HloModule:
    """The module after only XLA's required passes, at the counting point (default driver)."""
    return default_driver().run_required_passes(module)
