"""The pass driver: apply single XLA passes to modules, run XLA's default pipeline, count the result.

Every compiler call goes through a worker pool (`xlabench.xla.pool`), so a crash or a hang of XLA
becomes a `CompilerError` with a reproducer on disk, and the caller goes on. Results of single
passes are kept in the transition cache, keyed by jaxlib version, module fingerprint and pass; so
is a loaded text's canonical form, keyed by the text's sha256.

"Default" and "after a sequence" are counted at the same point: just before `layout-assignment`,
after XLA's required passes have run. `run_default_pipeline` runs the whole default pipeline to that
point; `run_required_passes` runs the same pipeline with every action pass disabled, and is what a
sequence's result goes through before it is counted.

A compiler change can be simulated by turning passes off in every compile (`disabled_passes`, or
`XLABENCH_DISABLE_PASSES=algsimp,cse` for every driver a process makes): the default pipeline, the
required passes and the executables all run without them, and applying one is a no-op.
"""

from __future__ import annotations

import collections
import difflib
import hashlib
import json
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from xlabench.errors import CompilerError, UnknownPassError, UserInputError
from xlabench.files import write_atomically, write_json
from xlabench.xla import payloads
from xlabench.xla import pool as compiler_pool
from xlabench.xla.cache import TransitionCache, cache_directory
from xlabench.xla.catalogue import (
    COUNTING_POINT_PASS,
    FIXED_POINT_LIMIT,
    FIXED_POINT_SUFFIX,
    STOP_PASS,
    PassCatalogue,
    base_pass,
    instance_key,
    load_catalogue,
)
from xlabench.xla.compilers import Compiler, compiler_build
from xlabench.xla.elided_constants import fill_elided_constants
from xlabench.xla.features import Features
from xlabench.xla.module import HloModule
from xlabench.xla.structure import NORMALIZATION_VERSION

DEFAULT_PIPELINE_KEY = "@default-pipeline"
LOAD_KEY = "@load"  # raw text -> canonical module, cached under the text's sha256
# Passes to turn off in every compile (comma-separated): a simulated compiler change.
DISABLE_PASSES_VARIABLE = "XLABENCH_DISABLE_PASSES"
REQUIRED_PASSES_KEY = "@required-passes"
LOADED_TEXTS_KEPT = 8
# Compiler-call arguments that only tell the worker which dumps to write (`compiler.run_pass`,
# `compiler.run_pipeline_to_point`): the result is the same either way, so cache keys leave them out.
_WHERE_DUMPED = frozenset({"successors", "point_pipeline"})
# Deaths that come from XLA itself (CHECK failures, faults): they recur on the same input.
_COMPILER_FAULT_SIGNALS = frozenset(
    {signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}
)


@dataclass(frozen=True)
class Step:
    """One pass of a sequence: the module after it, or the error it gave."""

    pass_name: str
    module: HloModule | None
    seconds: float
    error: CompilerError | None = None


class PassDriver:
    """Applies XLA passes through an isolated compiler pool, with a transition cache and crash reproducers."""

    def __init__(
        self,
        pool: compiler_pool.CompilerPool | None = None,
        cache: TransitionCache | None = None,
        use_cache: bool = True,
        crash_directory: str | None = None,
        timeout: float = compiler_pool.DEFAULT_TIMEOUT_SECONDS,
        disabled_passes: Iterable[str] | None = None,
        compiler: Compiler | None = None,
    ) -> None:
        if disabled_passes is None:
            disabled_passes = disabled_passes_from_environment()
        # The simulated compiler change: passes off in every compile (checked on first use).
        self.disabled_passes: tuple[str, ...] = tuple(dict.fromkeys(disabled_passes))
        self._checked_disabled = not self.disabled_passes
        if pool is not None and compiler is not None and pool.compiler != compiler:
            raise ValueError(
                f"the pool runs {pool.compiler.label}, the driver was asked for {compiler.label}"
            )
        # The compiler under test: the pool's, else the one named (default: `resolve_compiler()`).
        self.pool = pool or compiler_pool.default_pool(compiler)
        self.compiler = self.pool.compiler
        self.cache = (cache if cache is not None else TransitionCache()) if use_cache else None
        self.crash_directory = (
            crash_directory
            or os.environ.get("XLABENCH_CRASH_DIR")
            or os.path.join(cache_directory(), "crashes")
        )
        self.timeout = timeout
        self._features: dict[str, Features] = {}
        # (fingerprint, pass) pairs a fixed-point run ended on: the pass's last run changed nothing there.
        self._fixed_points: set[tuple[str, str]] = set()
        # Recently loaded texts (sha256 -> describe's answer): an eval row and its rollout load one graph.
        self._loaded: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        self._warned_elided: set[str] = set()
        self._lock = threading.Lock()
        # Compiler calls so far: answered by XLA in a worker, or by the transition cache.
        self.calls = {"xla": 0, "cached": 0}

    @property
    def catalogue(self) -> PassCatalogue:
        """The pass catalogue of the driver's compiler."""
        return load_catalogue(compiler=self.compiler)

    @property
    def jaxlib_version(self) -> str:
        """Version of the compiler under test."""
        return self.catalogue.jaxlib_version

    @property
    def compiler_build(self) -> str:
        """The build identity cached results are keyed by: release, native code, compiler-worker code."""
        return compiler_build(self.compiler)

    def load(self, text: str, source: str = "<text>") -> HloModule:
        """Canonicalize HLO text with XLA; malformed text raises UserInputError naming `source`.

        Elided constants (`{...}`) are first given deterministic values (`xlabench.xla.elided_constants`),
        with one warning per source.
        """
        text, elided = fill_elided_constants(text, source)
        if elided and source not in self._warned_elided:
            self._warned_elided.add(source)
            print(
                f"xlabench: warning: {source}: {elided} constant(s) printed without values ({{...}}) filled "
                "with xlabench's deterministic values: counts and runtimes hold, outputs are not the model's",
                file=sys.stderr,
            )
        digest = _text_sha256(text)
        with self._lock:
            description = self._loaded.get(digest)
        if description is None:
            # Every test and process that judges a graph loads it: the canonical form is cached too.
            key = self.cache_key(LOAD_KEY, "describe", {})
            description = self.cache.get(self.compiler_build, digest, key) if self.cache is not None else None
            if description is not None:
                with self._lock:
                    self.calls["cached"] += 1
            else:
                try:
                    description = self.call_compiler("describe", None, text)
                except CompilerError as error:
                    if error.kind == "error":
                        raise UserInputError(f"{source}: not a valid HLO module: {error.message}") from None
                    raise
                if self.cache is not None:
                    self.cache.put(self.compiler_build, digest, key, description)
            with self._lock:
                self._loaded[digest] = description
                while len(self._loaded) > LOADED_TEXTS_KEPT:
                    self._loaded.popitem(last=False)
                self._features.setdefault(
                    description["fingerprint"], Features.from_dict(description["features"])
                )
        return HloModule(description["text"], description["name"], description["fingerprint"], source)

    def features(self, module: HloModule) -> Features:
        """Op count, opcode histogram and cost analysis of a module."""
        with self._lock:
            known = self._features.get(module.fingerprint)
        if known is None:
            known = Features.from_dict(self.call_compiler("features", None, module))
            with self._lock:
                self._features[module.fingerprint] = known
        return known

    def check_pass(self, pass_name: str) -> None:
        """Raise UnknownPassError unless `pass_name` can be applied alone."""
        info = self.catalogue.get(pass_name)
        if pass_name.endswith(FIXED_POINT_SUFFIX) and (
            info is None or self.catalogue.fixed_point_variant(info.name) != pass_name
        ):
            raise UnknownPassError(
                f"{pass_name}: {base_pass(pass_name)} does not first run in a fixed-point pipeline"
            )
        if info is not None and info.kind == "pipeline":
            raise UnknownPassError(f"{pass_name}: is a pass pipeline, not a single pass")
        if info is not None:
            stop = self.catalogue.passes[STOP_PASS]
            if info.position >= stop.position:
                raise UnknownPassError(
                    f"{pass_name}: first runs at or after {STOP_PASS}, where a single-pass compile stops"
                )
            return
        close = difflib.get_close_matches(pass_name, self.catalogue.names(), n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else " (see `xlabench passes`)"
        raise UnknownPassError(f"{pass_name}: unknown pass for jaxlib {self.jaxlib_version}{hint}")

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
        return self._transition(
            module,
            key,
            "run_pass",
            pass_name=pass_name,
            disabled_passes=disabled,
            pipeline=path[-1] if path else None,
            occurrence=occurrence,
            successors=self.catalogue.successors(pass_name, path, compiled_off),
        )

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
                with self._lock:
                    self._fixed_points.add((current.fingerprint, pass_name))
                break
            current = following
        return current, runs

    def is_fixed_point(self, module: HloModule, pass_name: str) -> bool:
        """Whether a fixed-point run of `pass_name` (a base pass) ended on this module: it changes nothing."""
        with self._lock:
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

    def run_default_pipeline(self, module: HloModule) -> HloModule:
        """The module after XLA's default CPU pipeline, taken just before layout assignment."""
        return self._run_to_counting_point(module, DEFAULT_PIPELINE_KEY, disabled=[])

    def default_pipeline_changes(self, module: HloModule) -> list[tuple[str, str]]:
        """(pipeline, pass) of each run of XLA's default pipeline that changed the module, in order.

        One compile up to the counting point with every pass dumped: XLA's own order minus its
        no-ops, for ~1/40 of the compiles of a replay (`xlabench.xla.replay`) -- but on XLA's
        in-memory module, not through xlabench's canonical form between passes.
        """
        answer = self.call_compiler(
            "pipeline_changes", None, module, point_pass=COUNTING_POINT_PASS, disabled_passes=[]
        )
        return [(pipeline, pass_name) for pipeline, pass_name in answer["changes"]]

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
        return str(self.call_compiler("full_text", None, module))

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

    @staticmethod
    def cache_key(key: str, function: str, arguments: dict[str, Any]) -> str:
        """The transition-cache key: `key` (readable) plus a digest of all that decides the result.

        That is the compiler function, its arguments (the disabled-pass list -- derived from the
        catalogue's tables --, the instance of the pass, the counting point) and the version of the
        canonical form; the jaxlib version and the module's fingerprint are keys of their own.
        """
        # Where the worker finds its dump does not change the result: not in the key.
        decisive = {name: value for name, value in arguments.items() if name not in _WHERE_DUMPED}
        material = json.dumps(
            {"function": function, "arguments": decisive, "normalization": NORMALIZATION_VERSION},
            sort_keys=True,
        )
        return f"{key}|{hashlib.sha256(material.encode()).hexdigest()[:20]}"

    def _transition(self, module: HloModule, key: str, function: str, **arguments: Any) -> HloModule:
        """The module after compiler function `function` (cached under `key` and its arguments)."""

        def run() -> dict[str, Any]:
            result = self.call_compiler(function, key, module, **arguments)
            if result.get("unchanged"):  # the pass left XLA's module as it was given
                return {**result, "text": module.text, "name": module.name, "fingerprint": module.fingerprint}
            return result

        arguments = self.with_compiler_change(arguments)
        record = self._cached_or_run(module, self.cache_key(key, function, arguments), run)
        if "features" in record:  # answered with the result: no second call for them
            with self._lock:
                self._features.setdefault(record["fingerprint"], Features.from_dict(record["features"]))
        return HloModule(
            record["text"],
            record["name"],
            record["fingerprint"],
            f"{module.source} | {key}",
            record.get("seconds"),
        )

    def _cached_or_run(self, module: HloModule, key: str, run: Any) -> dict[str, Any]:
        if self.cache is not None:
            record = self.cache.get(self.compiler_build, module.fingerprint, key)
            if record is not None:
                with self._lock:
                    self.calls["cached"] += 1
                if "error" in record:
                    raise CompilerError.from_dict(record["error"])
                return record
        try:
            record = run()
        except CompilerError as error:
            if self.cache is not None and error.deterministic:  # hangs and kills may be load
                self.cache.put(self.compiler_build, module.fingerprint, key, {"error": error.to_dict()})
            raise
        record = {k: record[k] for k in ("text", "name", "fingerprint", "seconds", "features") if k in record}
        if self.cache is not None:
            self.cache.put(self.compiler_build, module.fingerprint, key, record)
        return record

    def call_compiler(
        self, function: str, subject: str | None, module: HloModule | str, **arguments: Any
    ) -> Any:
        """Run compiler.<function>(text=module's text, **arguments) in the pool, about pass `subject`.

        Failures become CompilerError carrying the module's fingerprint (for raw text that never
        parsed, the sha256 of the text); crashes and hangs also leave a reproducer on disk.
        """
        arguments = self.with_compiler_change(arguments)
        text = module if isinstance(module, str) else module.text
        fingerprint = _text_sha256(text) if isinstance(module, str) else module.fingerprint
        with self._lock:
            self.calls["xla"] += 1
        # Each full compile a call makes gets the whole timeout: a 50k-op module compiles in ~3 min, and
        # the runtime measurement compiles two of them in one call.
        timeout = self.timeout * (1 + len(arguments.get("others") or ()))
        try:
            return self.pool.call(function, timeout=timeout, text=text, **arguments)
        except compiler_pool.CompilerFailure as failure:
            raise CompilerError("error", str(failure), subject, fingerprint) from None
        except compiler_pool.WorkerDied as death:
            kind, message, tail = "crash", str(death), death.stderr_tail
            # A CHECK abort or a fault in XLA recurs on the same input; a SIGKILL (the out-of-memory
            # killer, a user) says nothing about the module.
            deterministic = death.exit_code is not None and -death.exit_code in _COMPILER_FAULT_SIGNALS
        except compiler_pool.WorkerTimedOut as timeout:
            kind, message, tail = "timeout", str(timeout), timeout.stderr_tail
            deterministic = False
        reproducer = self._save_reproducer(kind, function, subject, fingerprint, text, message, tail)
        raise CompilerError(
            kind, _crash_summary(message, tail), subject, fingerprint, tail, reproducer, deterministic
        )

    def with_compiler_change(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Compiler-call arguments with the simulated change's passes added to every disabled list."""
        if not self.disabled_passes:
            return arguments
        self.check_disabled_passes()
        changed = dict(arguments)

        def add(disabled: list[str]) -> list[str]:
            # Already off (a single-pass compile turns off all but one pass): the very same compile, and
            # its cache key stays valid across the change.
            if set(self.disabled_passes) <= set(disabled):
                return disabled
            return list(dict.fromkeys([*disabled, *self.disabled_passes]))

        if "disabled_passes" in changed:
            changed["disabled_passes"] = add(changed["disabled_passes"])
        if "others" in changed:  # further programs compiled in the same call: (text, disabled passes)
            changed["others"] = [(text, add(disabled)) for text, disabled in changed["others"]]
        return changed

    def check_disabled_passes(self) -> None:
        """Raise UnknownPassError unless every pass of the simulated compiler change is in the catalogue."""
        if self._checked_disabled:
            return
        for pass_name in self.disabled_passes:
            if self.catalogue.get(pass_name) is None:
                close = difflib.get_close_matches(pass_name, self.catalogue.names(), n=3)
                hint = f" (did you mean {', '.join(close)}?)" if close else " (see `xlabench passes`)"
                raise UnknownPassError(
                    f"{pass_name}: cannot disable an unknown pass for jaxlib {self.jaxlib_version}{hint}"
                )
        self._checked_disabled = True

    def _save_reproducer(
        self,
        kind: str,
        function: str,
        pass_name: str | None,
        fingerprint: str,
        module_text: str,
        message: str,
        stderr_tail: str,
    ) -> str:
        """Write module.hlo, passes.txt and error.json for a crash or hang; return the directory."""
        label = re.sub(r"[^\w.\-]+", "_", pass_name or function)
        directory = os.path.join(self.crash_directory, f"{kind}-{label}-{fingerprint[:12]}")
        write_atomically(os.path.join(directory, "module.hlo"), module_text.encode())
        # Constants named by payload go along (no compiler call after a crash to print them in full).
        for digest in payloads.without_markers(module_text)[1].values():
            try:
                literal = payloads.load(digest)
            except payloads.MissingPayload:
                continue
            write_atomically(os.path.join(directory, "payloads", digest[:2], digest), literal)
        write_atomically(os.path.join(directory, "passes.txt"), f"{pass_name or function}\n".encode())
        details = {
            "kind": kind,
            "function": function,
            "pass": pass_name,
            "fingerprint": fingerprint,
            "message": message,
            "stderr_tail": stderr_tail,
            "jaxlib": self.jaxlib_version,
            "replay": f"xlabench apply {os.path.join(directory, 'module.hlo')} {pass_name} -o /tmp/out.hlo"
            if pass_name and not pass_name.startswith("@")
            else None,
        }
        write_json(os.path.join(directory, "error.json"), details)
        return directory


def disabled_passes_from_environment() -> list[str]:
    """The passes $XLABENCH_DISABLE_PASSES turns off (comma-separated; empty when unset)."""
    value = os.environ.get(DISABLE_PASSES_VARIABLE, "")
    return [name.strip() for name in value.split(",") if name.strip()]


def _text_sha256(text: str) -> str:
    """Identity of raw text that has no module fingerprint yet (it may not even parse)."""
    return hashlib.sha256(text.encode()).hexdigest()


def _crash_summary(message: str, stderr_tail: str) -> str:
    """The message plus XLA's own first fatal line, when it printed one."""
    fatal = next((line for line in stderr_tail.splitlines() if re.match(r"^[FE]\d{4} ", line)), None)
    return f"{message}: {fatal.split('] ', 1)[-1]}" if fatal else message


_default_driver: PassDriver | None = None
_default_driver_lock = threading.Lock()


def default_driver() -> PassDriver:
    """The process-wide driver on the default pool and cache."""
    global _default_driver
    with _default_driver_lock:
        if _default_driver is None:
            _default_driver = PassDriver(use_cache=os.environ.get("XLABENCH_NO_CACHE") != "1")
        return _default_driver


def apply_pass(module: HloModule, pass_name: str) -> HloModule:
    """The module after one run of the XLA pass `pass_name` (default driver)."""
    return default_driver().apply_pass(module, pass_name)


def run_default_pipeline(module: HloModule) -> HloModule:
    """The module after XLA's default pipeline, at the counting point (default driver)."""
    return default_driver().run_default_pipeline(module)


def run_required_passes(module: HloModule) -> HloModule:
    """The module after only XLA's required passes, at the counting point (default driver)."""
    return default_driver().run_required_passes(module)
