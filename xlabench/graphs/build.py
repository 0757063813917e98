"""Lower suite graphs to HLO text and store them with their manifest entries.

Lowering is `jax.jit(fn).lower(*abstract_args).compiler_ir("hlo").as_hlo_text()`; the text is then
normalised so the bytes depend only on the model code and the jax version: op metadata (which can carry
source file paths and line numbers) is removed and the module is renamed after the graph.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import multiprocessing
import os
import re
import subprocess
import time
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlabench.errors import UserInputError
from xlabench.files import write_atomically
from xlabench.graphs import graph_sets
from xlabench.graphs.suite_definition import GraphSpec, suite
from xlabench.settings import Settings, current

if TYPE_CHECKING:
    from xlabench.models.common import Program
from xlabench.xla.driver.hlo_module import HloModule

_MODULE_HEADER = re.compile(r"^HloModule [^\s,]+")
# A Python with TensorFlow, for the family TensorFlow's XLA bridge lowers (xlabench's own has none).
TENSORFLOW_PYTHON_VARIABLE = "XLABENCH_TENSORFLOW_PYTHON"
_METADATA_START = ", metadata={"


@dataclass(frozen=True)
class BuildReport:
    """What one build produced."""

    built: list[str]
    directory: Path
    seconds: float
    stored_bytes: int


def strip_metadata(text: str) -> str:
    """Remove every `, metadata={...}` attribute, honouring quoted strings that may contain braces."""
    pieces = []
    position = 0
    while (start := text.find(_METADATA_START, position)) != -1:
        pieces.append(text[position:start])
        index = start + len(_METADATA_START)
        depth, in_string = 1, False
        while depth:
            char = text[index]
            if in_string:
                if char == "\\":
                    index += 1
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            index += 1
        position = index
    pieces.append(text[position:])
    return "".join(pieces)


def module_name(graph_name: str) -> str:
    """HLO module name for a graph: its name with separators XLA dump file names dislike replaced."""
    return re.sub(r"[^A-Za-z0-9_]", "_", graph_name)


def normalize_hlo(text: str, graph_name: str) -> str:
    """Make lowered HLO text reproducible: no metadata, module named after the graph, one trailing newline."""
    text = strip_metadata(text)
    text, renamed = _MODULE_HEADER.subn(f"HloModule {module_name(graph_name)}", text, count=1)
    if not renamed:
        raise ValueError(f"lowering of {graph_name} did not produce an HloModule header")
    return text.rstrip("\n") + "\n"


def lower(spec: GraphSpec, settings: Settings | None = None) -> str:
    """Lower one suite graph to normalised HLO text (a tensorflow graph with the TensorFlow Python of
    `settings`, default those in effect)."""
    return _lower_with_version(spec, (settings or current()).tensorflow_python)[0]


def _lower_with_version(spec: GraphSpec, tensorflow_python: str | None) -> tuple[str, str]:
    """Worker: (normalised HLO text, version of the framework that lowered it) for one graph. The
    TensorFlow Python is an argument: a spawned worker has no settings in effect."""
    if spec.framework == "tensorflow":
        return _lower_tensorflow(spec, tensorflow_python)
    import jax

    return lower_program(spec.program(), spec.name), jax.__version__


def lower_program(program: Program, name: str) -> str:
    """A jax program's normalised HLO text, its module named after `name` (imports jax)."""
    import jax

    text = jax.jit(program.fn).lower(*program.args).compiler_ir("hlo").as_hlo_text()
    return normalize_hlo(text, name)


def _lower_tensorflow(spec: GraphSpec, python: str | None) -> tuple[str, str]:
    """TensorFlow's XLA bridge in the TensorFlow interpreter `python`, then the module printed by jaxlib's
    XLA."""
    if not python:
        raise UserInputError(
            f"{spec.name}: the tensorflow family is lowered by TensorFlow: set {TENSORFLOW_PYTHON_VARIABLE} "
            "to a Python that has it (e.g. a venv with `pip install tensorflow-cpu==2.21.0`)"
        )
    script = importlib.util.find_spec("xlabench.models.tensorflow_models").origin
    try:
        run = subprocess.run(
            [python, script, json.dumps(spec.config)],
            capture_output=True,
            text=True,
            timeout=900,
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UserInputError(f"{spec.name}: TensorFlow lowering did not run: {error}") from None
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserInputError(f"{spec.name}: TensorFlow lowering failed: {last}")
    answer = json.loads(run.stdout)
    from xlabench.xla.worker import adapter  # jaxlib in this lowering process, as for the jax families

    module = adapter.module_from_proto(base64.b64decode(answer["proto"]))
    return normalize_hlo(adapter.module_text(module, adapter.print_options()), spec.name), answer["version"]


def _entry(spec: GraphSpec, text: str, op_count: int, version: str) -> dict[str, Any]:
    versions = {"jax_version": version} if spec.framework == "jax" else {
        "framework": spec.framework, f"{spec.framework}_version": version
    }  # fmt: skip
    return {
        "name": spec.name,
        "family": spec.family,
        "split": spec.split,
        "config": spec.config,
        "file": spec.name + graph_sets.GRAPH_SUFFIX,
        "instruction_count": op_count,
        "sha256": graph_sets.text_sha256(text),
        **versions,
    }


def build(
    specs: Iterable[GraphSpec],
    directory: Path = graph_sets.DATA_DIR,
    jobs: int = 1,
    settings: Settings | None = None,
) -> BuildReport:
    """Lower `specs` into `directory`, merging with entries of other suite graphs already recorded there.

    Entries for graphs no longer in the suite are dropped and their files removed. `settings` (default:
    those in effect) name the TensorFlow Python and the compiler that counts each graph's ops.
    """
    # Here, not at the top: the lowering workers import this module, and need no driver.
    from xlabench.xla.driver.pass_driver import default_driver

    settings = settings or current()
    python = settings.tensorflow_python
    started = time.perf_counter()
    specs = list(specs)
    directory.mkdir(parents=True, exist_ok=True)
    if jobs > 1 and len(specs) > 1:
        # spawn, not fork: jax is multithreaded and must not be forked after initialisation.
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            lowered = list(pool.map(_lower_with_version, specs, [python] * len(specs)))
    else:
        lowered = [_lower_with_version(spec, python) for spec in specs]

    driver = default_driver(settings)
    entries: dict[str, dict[str, Any]] = {}
    if (directory / graph_sets.MANIFEST_NAME).exists():
        suite_names = {spec.name for spec in suite()}
        previous = graph_sets.read_manifest(directory)["graphs"]
        entries = {entry["name"]: entry for entry in previous if entry["name"] in suite_names}
    for spec, (text, jax_version) in zip(specs, lowered, strict=True):
        # Counting parses the text with XLA (in xlabench.xla's own worker), which also validates it.
        op_count = driver.features(HloModule.from_text(text, spec.name, driver)).op_count
        write_atomically(directory / (spec.name + graph_sets.GRAPH_SUFFIX), graph_sets.compress_hlo(text))
        entries[spec.name] = _entry(spec, text, op_count, jax_version)
    graph_sets.write_manifest(directory, list(entries.values()))

    kept_files = {entry["file"] for entry in entries.values()}
    for stale in directory.glob("*" + graph_sets.GRAPH_SUFFIX):
        if stale.name not in kept_files:
            stale.unlink()
    stored = sum(path.stat().st_size for path in directory.iterdir() if path.is_file())
    return BuildReport([spec.name for spec in specs], directory, time.perf_counter() - started, stored)


CORPUS_SUFFIX = ".hlo"
SOURCES_NAME = "SOURCES.md"
_SOURCES_COLUMNS = ("file", "producer", "repository", "path in repository", "commit", "licence")
_COMMIT = re.compile(r"\b[0-9a-f]{40}\b")


def corpus_sources(directory: Path) -> dict[str, dict[str, str]]:
    """Each file's source, from the first table of the corpus's SOURCES.md: {graph name: config}.

    The config holds the producer (the column's first word: torch-xla, tensorflow, jax, ...), the
    repository, the path in it, the commit (the first 40-hex digest of the column, "" if none) and
    the licence.
    """
    path = directory / SOURCES_NAME
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise UserInputError(f"cannot read {path}: {error.strerror}") from None
    header = next((i for i, line in enumerate(lines) if line.startswith("| file |")), None)
    if header is None:
        raise UserInputError(f"{path}: no table whose first column is `file`")
    columns = [cell.strip() for cell in lines[header].strip("|").split("|")]
    if any(column not in columns for column in _SOURCES_COLUMNS):
        raise UserInputError(f"{path}: the table needs the columns {', '.join(_SOURCES_COLUMNS)}")
    sources = {}
    for line in lines[header + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) != len(columns) or not all(cells[columns.index(column)] for column in _SOURCES_COLUMNS):
            raise UserInputError(
                f"{path}: a row of the table has {len(cells)} cells, or an empty one: {line[:80]}"
            )
        row = dict(zip(columns, cells, strict=True))
        commit = _COMMIT.search(row["commit"])
        sources[row["file"].removesuffix(CORPUS_SUFFIX)] = {
            "producer": row["producer"].split()[0],
            "repository": row["repository"],
            "path": row["path in repository"],
            "commit": commit.group(0) if commit else "",
            "licence": row["licence"],
        }
    return sources


def index_corpus(directory: Path) -> list[dict[str, Any]]:
    """Write the manifest of a corpus: every `*.hlo` file of `directory`, stored as it was found.

    Each file needs its row in the corpus's SOURCES.md (`corpus_sources`); its family is its
    producer, its split the corpus's name, its instruction count XLA's op count.
    """
    sources = corpus_sources(directory)
    entries = []
    for path in sorted(directory.glob("*" + CORPUS_SUFFIX)):
        name = path.name.removesuffix(CORPUS_SUFFIX)
        if name not in sources:
            raise UserInputError(f"{path}: no row in {directory / SOURCES_NAME}")
        text = graph_sets.read_hlo(path)
        entries.append(
            {
                "name": name,
                "family": sources[name]["producer"],
                "split": directory.name,
                "config": sources[name],
                "file": path.name,
                "instruction_count": HloModule.from_text(text, source=str(path)).op_count,
                "sha256": graph_sets.text_sha256(text),
            }
        )
    unknown = sorted(set(sources) - {entry["name"] for entry in entries})
    if unknown:
        raise UserInputError(
            f"{directory / SOURCES_NAME} lists files that are not there: {', '.join(unknown)}"
        )
    graph_sets.write_manifest(directory, entries)
    return entries


def default_jobs() -> int:
    """Worker processes for a build: one per available core."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
