"""A compiler session: one compiler's pool, transition store and module loader, as a driver uses them.

What every pass-level call needs, apart from what the passes mean (`xlabench.xla.driver.pass_driver`): the
compiler under test, the simulated compiler change (`xlabench.xla.compilers.disabled_passes`), compiler calls
with crash reproducers (`xlabench.xla.compilers.client`), cached transitions
(`xlabench.xla.caches.transition_store`) and loaded modules with their features
(`xlabench.xla.driver.module_loader`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from xlabench.settings import Settings, current
from xlabench.xla.caches.transition_cache import TransitionCache
from xlabench.xla.caches.transition_store import TransitionStore, transition_key
from xlabench.xla.compilers import worker_pool
from xlabench.xla.compilers.client import CompilerClient
from xlabench.xla.compilers.disabled_passes import CompilerChange
from xlabench.xla.compilers.named_compilers import Compiler, compiler_build, resolve_compiler
from xlabench.xla.compilers.pass_catalogue import PassCatalogue, load_catalogue
from xlabench.xla.driver.features import Features
from xlabench.xla.driver.hlo_module import HloModule
from xlabench.xla.driver.module_loader import ModuleLoader
from xlabench.xla.shared import payloads
from xlabench.xla.shared.module_names import under_internal_name, with_module_name


class CompilerSession:
    """The compiler under test, reached through an isolated pool, with a transition cache and reproducers.

    What is not given comes from `settings` (default: those in effect, `xlabench.settings.current`): the
    compiler, the disabled passes, whether to cache, where reproducers go, the call timeout.
    """

    cache_key = staticmethod(transition_key)  # the transition-cache key of a compiler call

    def __init__(
        self,
        pool: worker_pool.CompilerPool | None = None,
        cache: TransitionCache | None = None,
        use_cache: bool | None = None,
        crash_directory: str | None = None,
        timeout: float | None = None,
        disabled_passes: Iterable[str] | None = None,
        compiler: Compiler | None = None,
        settings: Settings | None = None,
    ) -> None:
        super().__init__()
        if pool is not None and compiler is not None and pool.compiler != compiler:
            raise ValueError(
                f"the pool runs {pool.compiler.label}, the driver was asked for {compiler.label}"
            )
        settings = settings or current()
        self.settings = settings
        # The compiler under test: the pool's, else the one named, else the settings'.
        if pool is None:
            pool = worker_pool.default_pool(compiler or resolve_compiler(settings=settings), settings)
        self.pool = pool
        self.compiler = self.pool.compiler
        if use_cache is None:  # a cache given is used; else the settings decide
            use_cache = cache is not None or settings.use_cache
        self.cache = (
            (cache if cache is not None else TransitionCache(settings=settings)) if use_cache else None
        )
        # The simulated compiler change: passes off in every compile (checked on first use).
        self.change = CompilerChange(
            settings.disabled_passes if disabled_passes is None else disabled_passes, lambda: self.catalogue
        )
        self.disabled_passes = self.change.disabled_passes
        self.crash_directory = crash_directory or settings.crash_directory
        self.timeout = settings.compiler_timeout_seconds if timeout is None else timeout
        self.client = CompilerClient(
            self.pool, self.change, self.timeout, self.crash_directory, lambda: self.jaxlib_version
        )
        self.store = TransitionStore(self.cache, self.compiler)
        self.loader = ModuleLoader(self.client, self.store)

    @property
    def catalogue(self) -> PassCatalogue:
        """The pass catalogue of the driver's compiler."""
        return load_catalogue(compiler=self.compiler, settings=self.settings)

    @property
    def jaxlib_version(self) -> str:
        """Version of the compiler under test."""
        return self.catalogue.jaxlib_version

    @property
    def compiler_build(self) -> str:
        """The build identity cached results are keyed by: release, native code, compiler-worker code."""
        return compiler_build(self.compiler)

    @property
    def calls(self) -> dict[str, int]:
        """Compiler calls so far: answered by XLA in a worker, or by the transition cache."""
        return {"xla": self.client.calls, "cached": self.store.hits}

    def load(self, text: str, source: str = "<text>") -> HloModule:
        """Canonicalize HLO text with XLA; malformed text raises UserInputError naming `source`.

        Elided constants (`{...}`) are first given deterministic values
        (`xlabench.xla.driver.elided_constants`), with one warning per source.
        """
        return self.loader.load(text, source)

    def features(self, module: HloModule) -> Features:
        """Op count, opcode histogram and cost analysis of a module."""
        return self.loader.features(module)

    def call_compiler(
        self, function: str, subject: str | None, module: HloModule | str, **arguments: Any
    ) -> Any:
        """Run registered compiler function `function` on the module's text in the pool, about pass `subject`.

        Failures become CompilerError carrying the module's fingerprint (for raw text that never
        parsed, the sha256 of the text); crashes and hangs also leave a reproducer on disk.
        """
        return self.client.call(function, subject, module, **arguments)

    def with_compiler_change(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Compiler-call arguments with the simulated change's passes added to every disabled list."""
        return self.change.apply(arguments)

    def check_disabled_passes(self) -> None:
        """Raise UnknownPassError unless every pass of the simulated compiler change is in the catalogue."""
        self.change.check()

    def _transition(self, module: HloModule, key: str, function: str, **arguments: Any) -> HloModule:
        """The module after compiler function `function` (cached under `key` and its arguments)."""

        def run() -> dict[str, Any]:
            result = self.call_compiler(function, key, module, **arguments)
            if result.get("unchanged"):  # the pass left XLA's module as it was given
                text = under_internal_name(module.text)[0]  # as workers print it: not the name
                return {**result, "text": text, "fingerprint": module.fingerprint}
            return result

        arguments = self.with_compiler_change(arguments)
        record = self.store.cached_or_run(
            module.fingerprint,
            self.cache_key(key, function, arguments),
            run,
            usable=lambda kept: payloads.all_stored(kept["text"]),  # a removed payload is made again
        )
        if "features" in record:  # answered with the result: no second call for them
            self.loader.remember_features(record["fingerprint"], record["features"])
        # A pass never renames a module: the result bears its input's name, whatever made the record.
        return HloModule(
            with_module_name(record["text"], module.name),
            module.name,
            record["fingerprint"],
            f"{module.source} | {key}",
            record.get("seconds"),
        )
