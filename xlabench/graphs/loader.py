"""Loader API used by every later stage: turn a graph spec string into `Graph`s.

A spec is one of: `all`, a split (`train`, `test`, `unseen`), a family, a suite graph name, a corpus
beside the suite (`foreign`: real modules written by others; `synthetic`: small cases of what such
modules carry) or `CORPUS:FAMILY`, a corpus graph's name, a path to one HLO text file, or a directory.
A directory holding a `manifest.json` is read as a graph set made by `xlabench graphs build --out DIR`
(or a corpus's own); any other directory contributes its `*.hlo`, `*.hlo.gz` and XLA dump
`*.before_optimizations.txt` files (the module as the program handed it to XLA).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xlabench.errors import UserInputError
from xlabench.graphs import graph_sets
from xlabench.graphs.suite_definition import SPLITS, families
from xlabench.xla.driver.hlo_module import HloModule, ModuleServices

USER_FAMILY = "user"
# Config keys that make graphs of one family different architectures: TensorFlow's models, the
# recurrent cells, the control-flow programs, ResNet's versions and block types.
ARCHITECTURE = ("model", "cell", "program", "version", "block")
USER_SPLIT = "user"
# Longest suffixes first so `x.hlo.gz` is named `x`, not `x.hlo`.
USER_SUFFIXES: tuple[str, ...] = (".before_optimizations.txt", ".hlo.gz", ".hlo")


@dataclass(frozen=True)
class Graph:
    """One HLO graph: a suite member (with manifest metadata) or a user-supplied file."""

    name: str
    family: str
    split: str
    config: dict[str, Any] = field(hash=False, compare=False)
    path: Path
    instruction_count: int
    sha256: str

    def hlo_text(self) -> str:
        """The graph's HLO text (decompressed if stored gzipped)."""
        return graph_sets.read_hlo(self.path)

    @property
    def kind(self) -> tuple[str, ...]:
        """What kind of graph it is: family, architecture where a family has several (`ARCHITECTURE`),
        mode and dtype ("" where none)."""
        architecture = "/".join(str(self.config[key]) for key in ARCHITECTURE if key in self.config)
        parts = (self.family, architecture, self.config.get("mode", ""), self.config.get("dtype", ""))
        return tuple(str(part) for part in parts)

    @property
    def is_stored_suite_graph(self) -> bool:
        """Whether the graph is one of the suite's stored graphs (`graphs/data/`): not a module by others
        (`foreign/`, `synthetic/`) nor a user's file."""
        return self.path.resolve().parent == graph_sets.DATA_DIR


def load_graph_set(directory: Path = graph_sets.DATA_DIR) -> list[Graph]:
    """All graphs recorded in `directory/manifest.json`, sorted by name."""
    manifest = graph_sets.read_manifest(directory)
    return [
        Graph(
            name=entry["name"],
            family=entry["family"],
            split=entry["split"],
            config=entry["config"],
            path=directory / entry["file"],
            instruction_count=entry["instruction_count"],
            sha256=entry["sha256"],
        )
        for entry in manifest["graphs"]
    ]


def user_graph_name(path: Path) -> str:
    """Name of a user file: the file name without its HLO suffix."""
    for suffix in USER_SUFFIXES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return path.name[: -len(suffix)]
    return path.stem


def load_user_file(path: Path) -> Graph:
    """Parse one user HLO file with XLA and describe it as a `Graph` of family `user`."""
    from xlabench.xla.driver.hlo_module import HloModule

    text = graph_sets.read_hlo(path)
    module = HloModule.from_text(text, source=str(path))
    return Graph(
        name=user_graph_name(path),
        family=USER_FAMILY,
        split=USER_SPLIT,
        config={},
        path=path,
        instruction_count=module.op_count,
        sha256=graph_sets.text_sha256(text),
    )


def _user_directory(directory: Path) -> list[Graph]:
    files = sorted(
        path
        for path in directory.iterdir()
        if path.is_file() and any(path.name.endswith(suffix) for suffix in USER_SUFFIXES)
    )
    if not files:
        raise UserInputError(
            f"no graphs in directory {directory}: expected *.hlo, *.hlo.gz or *.before_optimizations.txt"
        )
    return [load_user_file(path) for path in files]


def _from_path(path: Path) -> list[Graph]:
    if path.is_dir():
        if (path / graph_sets.MANIFEST_NAME).exists():
            return load_graph_set(path)
        return _user_directory(path)
    return [load_user_file(path)]


def _exists(path: Path) -> bool:
    # A SPEC too long to be a file name (many graphs joined by commas) is no file, not an OSError.
    try:
        return path.exists()
    except OSError:
        return False


def resolve_graphs(spec: str) -> list[Graph]:
    """Graphs named by `spec`: `all`, a split, a family, `SPLIT:FAMILY` (e.g. `train:gpt2`), a suite
    graph name, an HLO file or a directory -- or several of these joined by commas (their union)."""
    if not spec.strip():
        # Path("") is the current directory: an empty SPEC must not quietly load whatever is there.
        raise UserInputError("empty graph SPEC (a stray comma?); see `xlabench graphs list`")
    if "," in spec and not _exists(Path(spec).expanduser()):
        union: dict[str, Graph] = {}
        for part in spec.split(","):
            union.update((graph.name, graph) for graph in resolve_graphs(part.strip()))
        return list(union.values())
    split, colon, family = spec.partition(":")
    if split in graph_sets.CORPORA:
        corpus = load_graph_set(graph_sets.CORPORA[split])
        selected = [g for g in corpus if not colon or g.family == family]
        if not selected:
            known = ", ".join(sorted({g.family for g in corpus}))
            raise UserInputError(f"no {family!r} graphs in the {split} corpus (its families: {known})")
        return selected
    if colon and split in SPLITS and family in families():
        selected = [g for g in load_graph_set() if g.split == split and g.family == family]
        if not selected:
            raise UserInputError(f"no {family} graphs in the {split} split")
        return selected
    if spec in ("all", *SPLITS) or spec in families():
        graphs = load_graph_set()
        selected = [g for g in graphs if spec == "all" or g.split == spec or g.family == spec]
        if not selected:
            raise UserInputError(
                f"no graphs for {spec!r} in {graph_sets.DATA_DIR}; run `xlabench graphs build`"
            )
        return selected
    path = Path(spec).expanduser()
    if _exists(path):
        return _from_path(path)
    by_name = {g.name: g for g in load_graph_set()}
    if spec not in by_name:  # a corpus graph's name, or a near miss of any name
        for directory in graph_sets.CORPORA.values():
            by_name.update((g.name, g) for g in load_graph_set(directory))
    if spec in by_name:
        return [by_name[spec]]
    if "/" in spec or spec.endswith(USER_SUFFIXES):
        raise UserInputError(f"no such file or directory: {spec}")
    close = difflib.get_close_matches(spec, list(by_name), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else "; see `xlabench graphs list`"
    raise UserInputError(f"unknown graph, family or split {spec!r}{hint}")


def load_module(spec: str, driver: ModuleServices | None = None) -> HloModule:
    """An HLO module from a file path, or from the graph suite by name (exactly one graph), loaded with
    `driver` (default the process's)."""
    looks_like_path = os.sep in spec or spec.endswith((".hlo", ".txt")) or os.path.exists(spec)
    if looks_like_path:
        return HloModule.from_file(spec, driver)
    graphs = resolve_graphs(spec)
    if len(graphs) != 1:
        raise UserInputError(f"{spec}: names {len(graphs)} graphs, expected one .hlo file or graph name")
    graph = graphs[0]
    return HloModule.from_text(graph.hlo_text(), source=graph.name, driver=driver)
