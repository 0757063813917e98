"""Modules in: raw HLO text canonicalized by XLA, and the features of modules remembered by fingerprint."""

from __future__ import annotations

import collections
import sys
import threading
from typing import Any

from xlabench.errors import CompilerError, UserInputError
from xlabench.xla.caches.transition_store import TransitionStore, transition_key
from xlabench.xla.compilers.client import CompilerClient, text_sha256
from xlabench.xla.driver.elided_constants import fill_elided_constants
from xlabench.xla.driver.features import Features
from xlabench.xla.driver.hlo_module import HloModule
from xlabench.xla.shared import payloads
from xlabench.xla.shared.module_names import with_module_name

LOAD_KEY = "@load"  # raw text -> canonical module, cached under the text's sha256
LOADED_TEXTS_KEPT = 8


class ModuleLoader:
    """Loads texts through a compiler client and a transition store; remembers what it learned of modules."""

    def __init__(self, client: CompilerClient, store: TransitionStore) -> None:
        self.client = client
        self.store = store
        self._features: dict[str, Features] = {}
        # Recently loaded texts (sha256 -> describe's answer): an eval row and its rollout load one graph.
        self._loaded: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()
        self._warned_elided: set[str] = set()
        self._lock = threading.Lock()

    def load(self, text: str, source: str = "<text>") -> HloModule:
        """Canonicalize HLO text with XLA; malformed text raises UserInputError naming `source`.

        Elided constants (`{...}`) are first given deterministic values
        (`xlabench.xla.driver.elided_constants`), with one warning per source.
        """
        text, elided = fill_elided_constants(text, source)
        if elided and source not in self._warned_elided:
            self._warned_elided.add(source)
            print(
                f"xlabench: warning: {source}: {elided} constant(s) printed without values ({{...}}) filled "
                "with xlabench's deterministic values: counts and runtimes hold, outputs are not the model's",
                file=sys.stderr,
            )
        digest = text_sha256(text)
        with self._lock:
            description = self._loaded.get(digest)
        if description is None or not payloads.all_stored(description["text"]):
            description = self._describe(text, digest, source)
            with self._lock:
                self._loaded[digest] = description
                while len(self._loaded) > LOADED_TEXTS_KEPT:
                    self._loaded.popitem(last=False)
            self.remember_features(description["fingerprint"], description["features"])
        name, fingerprint = description["name"], description["fingerprint"]
        return HloModule(with_module_name(description["text"], name), name, fingerprint, source)

    def _describe(self, text: str, digest: str, source: str) -> dict[str, Any]:
        """XLA's canonical description of the text, from the transition store when it was loaded before."""
        # Every test and process that judges a graph loads it: the canonical form is cached too.
        key = transition_key(LOAD_KEY, "describe", {})
        description = self.store.get(digest, key)
        if description is not None and not payloads.all_stored(description["text"]):
            description = None  # a payload it names is gone (removed as damaged): the text stores it again
        if description is None:
            try:
                description = self.client.call("describe", None, text)
            except CompilerError as error:
                if error.kind == "error":
                    raise UserInputError(f"{source}: not a valid HLO module: {error.message}") from None
                raise
            self.store.put(digest, key, description)
        return description

    def features(self, module: HloModule) -> Features:
        """Op count, opcode histogram and cost analysis of a module."""
        with self._lock:
            known = self._features.get(module.fingerprint)
        if known is None:
            known = Features.from_dict(self.client.call("features", None, module))
            with self._lock:
                self._features[module.fingerprint] = known
        return known

    def remember_features(self, fingerprint: str, features: dict[str, Any]) -> None:
        """Keep the features a compiler call answered along with a module (the first answer stands)."""
        with self._lock:
            self._features.setdefault(fingerprint, Features.from_dict(features))
