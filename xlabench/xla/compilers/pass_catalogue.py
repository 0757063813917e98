"""The pass catalogue: the installed XLA CPU pipeline, discovered at run time, with every pass classified.

Discovery compiles a probe module in a worker with `TF_CPP_VMODULE=hlo_pass_pipeline=1` and reads
the pipeline tree from XLA's own log: "Running HLO pass pipeline on module M: P" opens pipeline P,
"  HLO pass X" runs X inside the innermost open pipeline, and the timing line "HLO pass: P time"
closes a nested pipeline. The result is cached per jaxlib version, so a jaxlib bump rediscovers it.

Classes. Every pass whose first run comes before the counting point is a *candidate*; a candidate
that applies cleanly to every suite graph (measured with `xlabench bench passes`) -- on its own, or
after the pass it requires (REQUIREMENTS) -- is an action, in one of two classes:
- simplification: a target-independent simplification (the table below); the required-only
  pipeline turns these off, so a policy's sequence is what applies them;
- orderable: a pass the backend needs (expander, normalizer, canonicalizer, ...) that a policy may
  also apply early; the required-only pipeline still runs it, so every result stays a module the
  backend accepts;
- excluded: a candidate that does not apply cleanly on its own (the measured reason says why); it
  stays on wherever required passes run;
- required: first runs at or after the counting point (layout assignment, fusion, copy insertion);
- pipeline: a pass pipeline (a container, never applied by itself).

Action sets name the actions a policy or search may choose from: `all` (simplification and
orderable passes, the default), `simplification`, and `fixed-point`: the `all` set, with each pass
whose first run is inside a fixed-point pipeline (XLA's `simplification`, an HloPassFix) taken as
its *fixed-point variant*, "PASS:fixed-point": the pass applied again and again until it changes
nothing, as XLA's loop does. Where XLA runs reshape-mover three times (it moves one layer of
reshapes a run), the variant is one action, and a policy need not guess how deep the graph is;
each run is still a compiler call, counted. `fixed-point-and-single` offers both, the variant and
the single run: a variant's last run is the one that finds nothing to do, so where one run reaches
the fixed point, the single run gets the same module for one call less.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from xlabench.errors import CompilerError, DriverError, UserInputError
from xlabench.files import write_atomically, write_json
from xlabench.settings import Settings, current
from xlabench.xla.caches.transition_cache import cache_unwritable, crash_directory
from xlabench.xla.compilers import worker_pool
from xlabench.xla.compilers.named_compilers import Compiler, compiler_build, resolve_compiler
from xlabench.xla.shared.cache_directory import cache_directory

# Where "default" and "after a sequence" are both counted: just before this pass runs.
COUNTING_POINT_PASS = "layout-assignment"
# The pass whose early failure (on the stop marker) ends a single-pass compile.
STOP_PASS = "copy-insertion"
CATALOGUE_FORMAT = 2  # 2: pipelines that iterate to a fixed point are marked

# Named action sets: which pass classes a policy or search may choose from.
ACTION_SETS: dict[str, tuple[str, ...]] = {
    "all": ("simplification", "orderable"),
    "simplification": ("simplification",),
    "fixed-point": ("simplification", "orderable"),
    "fixed-point-and-single": ("simplification", "orderable"),
}
# The suffix naming a pass's fixed-point variant, and the action sets that use the variants.
FIXED_POINT_SUFFIX = ":fixed-point"
FIXED_POINT_LIMIT = 25  # runs of one fixed-point variant at most (XLA's HloPassFix stops at 25 too)
FIXED_POINT_ACTION_SETS = ("fixed-point", "fixed-point-and-single")
# Action sets that keep such a pass's single run beside its variant.
SINGLE_RUN_ACTION_SETS = ("fixed-point-and-single",)
DEFAULT_ACTION_SET = "all"
# Classes of the passes whose first run comes before the counting point.
CANDIDATE_KINDS = ("simplification", "orderable", "excluded")

SIMPLIFICATION_PASSES: dict[str, str] = {
    "algsimp": "algebraic simplifier: rewrites expressions into cheaper equivalents",
    "cse": "common subexpression elimination",
    "dce": "dead code elimination",
    "reshape-mover": "moves reshapes and transposes across elementwise operations",
    "constant_folding": "evaluates instructions whose operands are all constants",
    "transpose-folding": "folds transposes into dot and convolution dimension numbers",
    "tuple-simplifier": "removes tuple/get-tuple-element pairs that cancel",
    "simplify-while-loops": "removes dead while-loop state, unrolls trivial loops",
    "while-loop-invariant-code-motion": "hoists loop-invariant instructions out of while loops",
    "while-loop-constant-sinking": "sinks constant loop state into the loop body",
    "simplify-conditional": "removes conditionals with constant predicates or single branches",
    "call-inliner": "inlines called computations into their callers",
    "batch-dot-simplification": "removes degenerate batch dimensions of dots",
    "zero_sized_hlo_elimination": "replaces zero-element instructions by constants",
    "simplify-sorts": "drops unused sort operands",
    "dynamic-dimension-simplifier": "folds dynamic-dimension bookkeeping",
    "conditional-to-select": "turns small conditionals into selects",
    "map-inline": "inlines map computations that are a single elementwise op",
}

# Candidates that do not apply cleanly on their own to some suite graph, with the measured reason.
# None on jaxlib 0.10.2: `xlabench bench passes all` finds the 74 candidates clean on all 160
# graphs, given the requirements below.
EXCLUDED_PASSES: dict[str, str] = {}

# Orderable passes that need another pass earlier in the sequence: (that pass, why). Measured on
# jaxlib 0.10.2: alone, each fails on the 81 suite graphs with batched gathers/scatters (e.g.
# take_along_axis in the GPT-2 training step); after batched_gather_scatter_normalizer, on none.
# In XLA's pipeline the normalizer runs first. The backend needs both (the CPU emitter CHECK-fails
# on gathers nothing canonicalized), so they are orderable, not simplification passes.
REQUIREMENTS: dict[str, tuple[str, str]] = {
    "gather_simplifier": (
        "batched_gather_scatter_normalizer",
        "canonicalizes gathers; RET_CHECK failure (shape mismatch) on batched gathers unless "
        "batched_gather_scatter_normalizer ran first",
    ),
    "scatter_simplifier": (
        "batched_gather_scatter_normalizer",
        "canonicalizes scatters; aborts the compiler (CHECK dim_to_insert < output_shape_rank) on "
        "batched scatters unless batched_gather_scatter_normalizer ran first",
    ),
}

# Orderable passes whose input another orderable pass makes (pass -> (its feeders, why)). After a
# sequence that applied the pass but not a feeder, the required-only compile runs the feeder, and the
# pass must run again after it: a TensorFlow CNN training step's max-pool gradient is a select-and-scatter,
# which select_and_scatter_expander turns into a scatter that the CPU emitter refuses unless
# scatter_simplifier canonicalizes it (CHECK IsSimplifiedScatter, the compiler aborts).
FED_BY: dict[str, tuple[tuple[str, ...], str]] = {
    "scatter_simplifier": (
        ("select_and_scatter_expander",),
        "select_and_scatter_expander makes scatters the CPU emitter refuses unless it canonicalizes them",
    ),
}


# Passes that rewrite only instructions of these opcodes (spelled as in the features' histogram): on a
# module with none of them they change nothing, so an environment can mask them without a compiler
# call. Checked on jaxlib 0.10.2 against every transition in an 18,618-record cache (6,500 runs of these
# passes): none changed a module that lacked its opcodes (docs/design.md, "Passes known to change nothing").
TARGET_OPCODES: dict[str, tuple[str, ...]] = {
    "batched_gather_scatter_normalizer": ("gather", "scatter"),
    "gather_simplifier": ("gather",),
    "gather_expander": ("gather",),
    "scatter_simplifier": ("scatter",),
    "scatter_expander": ("scatter",),
    "select_and_scatter_expander": ("select-and-scatter",),
    "call-inliner": ("call",),
    "map-inline": ("map",),
    "dot_decomposer": ("dot",),
    "gemv-rewriter": ("dot",),
    "batch-dot-simplification": ("dot",),
    "transpose-folding": ("transpose",),
    "tree_reduction_rewriter": ("reduce", "reduce-window"),
    "reduce-window-rewriter": ("reduce-window",),
    "topk-rewriter": ("sort",),
    "topk-decomposer": ("top-k", "custom-call"),
    "simplify-sorts": ("sort",),
    "comparison-expander": ("compare", "sort"),
    "convolution-group-converter": ("convolution",),
    "convolution-canonicalization": ("convolution",),
    "batchnorm_expander": ("batch-norm-training", "batch-norm-inference", "batch-norm-grad"),
    "logistic-expander": ("logistic",),
    "rng-expander": ("rng",),
    "rng-bit-generator-expander": ("rng-bit-generator",),
    "cholesky_expander": ("cholesky",),
    "triangular_solve_expander": ("triangular-solve",),
    "simplify-while-loops": ("while",),
    "while-loop-invariant-code-motion": ("while",),
    "while-loop-constant-sinking": ("while",),
    "simplify-conditional": ("conditional",),
    "conditional-canonicalizer": ("conditional",),
    "conditional-to-select": ("conditional",),
}


def inapplicable(pass_name: str, histogram: dict[str, int]) -> bool:
    """Whether a pass (or its fixed-point variant) has nothing to rewrite: none of its opcodes is there."""
    targets = TARGET_OPCODES.get(base_pass(pass_name))
    return targets is not None and not any(histogram.get(opcode) for opcode in targets)


@dataclass(frozen=True)
class PassInfo:
    """One distinct pass name of the pipeline."""

    name: str
    kind: str  # "simplification" | "orderable" | "excluded" | "required" | "pipeline"
    ancestors: tuple[str, ...]  # pipelines around its first run, outermost first
    position: int  # order of its first run in the flattened pipeline
    runs: int  # how many times it appears in the pipeline
    description: str = ""
    # One key per time it appears before the counting point (`instance_key`), in pipeline order.
    instances: tuple[str, ...] = ()
    requires: str | None = None  # a pass that must come earlier in a sequence (REQUIREMENTS)


class CompileSwitches:
    """What to switch off in XLA's pipeline for one kind of compile: a single pass, the required passes
    after a sequence, the passes from the counting point on. Part of `PassCatalogue`, apart because
    it is about compiles, not about the passes."""

    tree: list[dict[str, Any]]
    passes: dict[str, PassInfo]

    def disabled_for_single_pass(
        self, pass_name: str, pipeline_path: tuple[str, ...] | None = None
    ) -> list[str]:
        """Names to disable so that only `pass_name` runs, then the stop pass ends the compile.

        The pass runs inside the pipelines of `pipeline_path` (outermost first), by default those
        around its first run.
        """
        info = self.passes[pass_name]
        stop = self.passes[STOP_PASS]
        path = info.ancestors if pipeline_path is None else pipeline_path
        enabled = {pass_name, *path, STOP_PASS, *stop.ancestors}
        return sorted(name for name in self.passes if name not in enabled)

    def successors(
        self, pass_name: str, pipeline_path: tuple[str, ...], disabled_passes: Iterable[str]
    ) -> list[str]:
        """What XLA runs right after `pass_name` in the pipeline at `pipeline_path`, `disabled_passes` off.

        The names (or "pipeline-end") a single-pass compile can dump the pass's output before: a dump
        names the pass before and the pass after it, so dumping "before the successor" writes one
        file a run instead of two. Empty when the path is not in the tree.
        """
        nodes: list[dict[str, Any]] = self.tree
        for name in pipeline_path:
            node = next((n for n in nodes if n["name"] == name and "children" in n), None)
            if node is None:
                return []
            nodes = node["children"]
        off = set(disabled_passes)
        enabled = [node["name"] for node in nodes if node["name"] not in off]
        following = enabled[1:] + ["pipeline-end"]
        return sorted({after for name, after in zip(enabled, following, strict=True) if name == pass_name})

    def disabled_for_required_only(self, applied_instances: Iterable[str] = ()) -> list[str]:
        """Names to disable so that only required passes run after a sequence.

        Every simplification pass is off: the sequence is what applies them. Orderable and excluded
        passes stay on -- the backend needs them (the CPU emitter CHECK-fails on gathers that
        gather_simplifier has not canonicalized, on bf16 ops nothing normalized) -- except a pass
        whose every instance the sequence applied itself (`applied_instances` holds the
        `instance_key`s of what it applied): as in XLA's pipeline, each instance runs once, there
        where the sequence put it. Running one again after the simplifications that followed it is
        not idempotent (convolution-canonicalization re-inserts the transposes algsimp folded,
        bf16 normalization the converts algsimp removed), so XLA's own module would not count as
        itself. A pass XLA adds twice with different options (convolution-group-converter) keeps
        running until the sequence applied both. A pass another one feeds (`FED_BY`:
        scatter_simplifier) runs again when the feeder still runs or the sequence applied it later.
        """
        applied_instances = list(applied_instances)
        # A fixed-point variant ran the pass's first instance (to its fixed point).
        applied = {base_pass(key) for key in applied_instances}
        disabled = {
            name
            for name, info in self.passes.items()
            if info.kind == "simplification"
            or (info.kind in CANDIDATE_KINDS and info.instances and applied.issuperset(info.instances))
        }
        # A pass runs again when something feeds it after its last run: a feeder the required-only
        # compile still runs, or one the sequence applied later than the pass (FED_BY).
        order = [base_pass(key.split("@", 1)[0]) for key in applied_instances]
        last = {name: position for position, name in enumerate(order)}
        still_running = set(self.passes) - disabled
        fed_again = {
            name
            for name, (feeders, _) in FED_BY.items()
            if still_running.intersection(feeders)
            or any(last.get(feeder, -1) > last.get(name, -1) for feeder in feeders)
        }
        return sorted(disabled - fed_again)

    def disabled_before_counting_point(self) -> list[str]:
        """Names to disable so that a compile runs (nearly) only what comes from the counting point on.

        That is every pass and pipeline that appears only before the counting point. XLA disables
        by name, so a pass that also runs later stays on everywhere: its earlier runs inside
        pipelines that end before the counting point (dce, algsimp) are off with those pipelines,
        but `cse`, `tuple-simplifier` and `dot_decomposer` also run once more just before layout
        assignment.
        """
        spans: list[tuple[str, int, int]] = []  # name, first and last pass position it covers
        position = 0

        def visit(nodes: list[dict[str, Any]]) -> None:
            nonlocal position
            for node in nodes:
                start = position
                if "children" in node:
                    visit(node["children"])
                else:
                    position += 1
                spans.append((node["name"], start, position - 1))

        visit(self.tree)
        point = next(start for name, start, _ in spans if name == COUNTING_POINT_PASS)
        later = {name for name, _, end in spans if end >= point}
        return sorted({name for name, _, _ in spans} - later)

    def counting_point_siblings(self) -> list[str]:
        """Names of the passes in the pipeline that holds the counting-point pass."""
        info = self.passes[COUNTING_POINT_PASS]
        parent = info.ancestors[-1] if info.ancestors else None
        siblings: list[str] = []
        for node in _walk(self.tree):
            if node["name"] == parent:
                siblings = [child["name"] for child in node["children"]]
                break
        return siblings


@dataclass
class PassCatalogue(CompileSwitches):
    """The installed CPU pipeline: tree, distinct passes and their classes."""

    jaxlib_version: str
    tree: list[dict[str, Any]]
    passes: dict[str, PassInfo] = field(default_factory=dict)

    def names(self) -> list[str]:
        """Every distinct pass and pipeline name."""
        return list(self.passes)

    def action_passes(self, action_set: str = DEFAULT_ACTION_SET) -> list[str]:
        """The passes of an action set (`all`, `simplification`), in pipeline order."""
        if action_set not in ACTION_SETS:
            raise UserInputError(f"{action_set}: unknown action set (choose {', '.join(ACTION_SETS)})")
        kinds = ACTION_SETS[action_set]
        actions = [info for info in self.passes.values() if info.kind in kinds]
        names = [info.name for info in sorted(actions, key=lambda info: info.position)]
        if action_set in SINGLE_RUN_ACTION_SETS:
            return [kept for name in names for kept in (name, self.fixed_point_variant(name)) if kept]
        if action_set in FIXED_POINT_ACTION_SETS:
            names = [self.fixed_point_variant(name) or name for name in names]
        return names

    def fixed_point_pipeline(self, pass_name: str) -> str | None:
        """The innermost fixed-point pipeline around the pass's first run, or None."""
        info = self.passes.get(pass_name)
        if info is None:
            return None
        fixed = {node["name"] for node in _walk(self.tree) if node.get("fixed_point")}
        return next((name for name in reversed(info.ancestors) if name in fixed), None)

    def fixed_point_variant(self, pass_name: str) -> str | None:
        """PASS:fixed-point, the variant name, if the pass first runs in a fixed-point pipeline; else None."""
        if self.fixed_point_pipeline(pass_name) is None:
            return None
        return pass_name + FIXED_POINT_SUFFIX

    def action_for(self, pass_name: str, actions: list[str]) -> str | None:
        """The action of `actions` running `pass_name` as XLA does: its variant if offered, else itself."""
        variant = self.fixed_point_variant(pass_name)
        if variant is not None and variant in actions:
            return variant
        return pass_name if pass_name in actions else None

    def unmet_requirement(self, pass_name: str, sequence: Iterable[str]) -> str | None:
        """The pass `pass_name` needs earlier in `sequence` (names or instance keys) and lacks, or None."""
        info = self.passes.get(base_pass(pass_name))
        if info is None or info.requires is None:
            return None
        applied = {base_pass(key.split("@", 1)[0]) for key in sequence}
        return None if info.requires in applied else info.requires

    def worth_taking(self, pass_name: str, changed: bool) -> bool:
        """Whether a sequence keeps a pass: it changed the module, or another pass requires it earlier."""
        return changed or base_pass(pass_name) in self.requirements()

    def requirements(self) -> set[str]:
        """The passes some other pass requires earlier in a sequence."""
        return {info.requires for info in self.passes.values() if info.requires is not None}

    def candidate_passes(self) -> list[str]:
        """Every pass whose first run comes before the counting point, in pipeline order."""
        candidates = [info for info in self.passes.values() if info.kind in CANDIDATE_KINDS]
        return [info.name for info in sorted(candidates, key=lambda info: info.position)]

    def get(self, pass_name: str) -> PassInfo | None:
        """The entry for one pass name (a fixed-point variant: its pass's), or None."""
        return self.passes.get(base_pass(pass_name))

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON (and the cache file)."""
        return {
            "format": CATALOGUE_FORMAT,
            "jaxlib_version": self.jaxlib_version,
            "counting_point": COUNTING_POINT_PASS,
            "tree": self.tree,
            "passes": [asdict(info) for info in sorted(self.passes.values(), key=lambda i: i.position)],
        }


_LINE = re.compile(
    r"hlo_pass_pipeline\.cc:\d+\] (?:"
    r"Running HLO pass pipeline on module .*?: (?P<pipeline>.+)"
    r"|  HLO pass (?P<run>.+)"
    r"|HLO pass: (?P<done>.+?) time: .*)$"
)


def parse_pipeline_log(log: str) -> list[dict[str, Any]]:
    """Build the pipeline tree from XLA's hlo_pass_pipeline VLOG lines."""
    roots: list[dict[str, Any]] = []
    stack: list[dict[str, Any]] = []
    last_run: str | None = None
    for line in log.splitlines():
        match = _LINE.search(line)
        if match is None:
            continue
        if match.group("pipeline") is not None:
            name = match.group("pipeline").strip()
            if stack and stack[-1]["name"] == name:
                stack[-1]["runs"] += 1  # a fixed-point pipeline iterates: children are known
            elif stack and last_run == name:
                node = next((c for c in reversed(stack[-1]["children"]) if c["name"] == name), None)
                if node is None:  # the parent is iterating and did not record children again
                    node = {"name": name}
                if "runs" in node:
                    node["runs"] += 1
                else:
                    node.update({"children": [], "runs": 1})
                stack.append(node)
            else:
                node = {"name": name, "children": [], "runs": 1}
                roots.append(node)
                stack = [node]
            last_run = None
        elif match.group("run") is not None:
            name = match.group("run").strip()
            last_run = name
            if stack and stack[-1]["runs"] == 1:
                stack[-1]["children"].append({"name": name})
        else:
            name = match.group("done").strip()
            if len(stack) > 1 and stack[-1]["name"] == name:
                stack.pop()
    for node in _walk(roots):
        # A pipeline whose header repeats back to back is a fixed-point pipeline (HloPassFix).
        if node.pop("runs", 1) > 1:
            node["fixed_point"] = True
    return roots


def base_pass(name: str) -> str:
    """The pass an action runs: the name itself, or the pass of a fixed-point variant."""
    return name.removesuffix(FIXED_POINT_SUFFIX)


def _walk(nodes: list[dict[str, Any]]):
    for node in nodes:
        yield node
        yield from _walk(node.get("children", []))


def instance_key(pass_name: str, pipeline_path: tuple[str, ...], occurrence: int, first: bool) -> str:
    """Name one instance of a pass: its name for the first, "name@outer/inner#k" for the others.

    `occurrence` k counts the times the pass appears directly in the innermost pipeline of
    `pipeline_path`. The key is also the transition-cache key of applying that instance.
    """
    return pass_name if first else f"{pass_name}@{'/'.join(pipeline_path)}#{occurrence}"


def classify(tree: list[dict[str, Any]], jaxlib_version: str) -> PassCatalogue:
    """Give every distinct name in the tree its class, ancestors, first position and instances."""
    passes: dict[str, PassInfo] = {}
    counts: dict[str, int] = {}
    order: list[tuple[str, tuple[str, ...], bool]] = []
    instances: dict[str, list[str]] = {}
    counting_point_reached = False

    def visit(nodes: list[dict[str, Any]], ancestors: tuple[str, ...]) -> None:
        nonlocal counting_point_reached
        occurrences: dict[str, int] = {}
        for node in nodes:
            name, is_pipeline = node["name"], "children" in node
            order.append((name, ancestors, is_pipeline))
            counts[name] = counts.get(name, 0) + 1
            if is_pipeline:
                visit(node["children"], (*ancestors, name))
                continue
            occurrences[name] = occurrences.get(name, 0) + 1
            counting_point_reached = counting_point_reached or name == COUNTING_POINT_PASS
            if not counting_point_reached:
                keys = instances.setdefault(name, [])
                keys.append(instance_key(name, ancestors, occurrences[name], first=not keys))

    visit(tree, ())
    counting_point = next((i for i, (name, _, _) in enumerate(order) if name == COUNTING_POINT_PASS), None)
    if counting_point is None or not any(name == STOP_PASS for name, _, _ in order):
        raise RuntimeError(
            f"the installed XLA CPU pipeline has no {COUNTING_POINT_PASS} or {STOP_PASS}: "
            "xlabench's driver needs updating for this jaxlib"
        )
    for position, (name, ancestors, is_pipeline) in enumerate(order):
        if name in passes:
            continue
        if is_pipeline:
            kind = "pipeline"
        elif position >= counting_point:
            kind = "required"
        elif name in EXCLUDED_PASSES:
            kind = "excluded"
        elif name in SIMPLIFICATION_PASSES:
            kind = "simplification"
        else:
            kind = "orderable"
        requires, requirement_reason = REQUIREMENTS.get(name, (None, ""))
        description = (
            EXCLUDED_PASSES.get(name)
            if kind == "excluded"
            else SIMPLIFICATION_PASSES.get(name) or requirement_reason
        )
        passes[name] = PassInfo(
            name,
            kind,
            ancestors,
            position,
            counts[name],
            description or "",
            tuple(instances.get(name, ())),
            requires if kind == "orderable" else None,
        )
    return PassCatalogue(jaxlib_version=jaxlib_version, tree=tree, passes=passes)


DISCOVERY = "@discover-pipeline"  # the compiler call that discovers the pipeline, as errors name it


def discover(compiler: Compiler, timeout: float = 600, settings: Settings | None = None) -> PassCatalogue:
    """Compile the probe module with pipeline logging on and classify what ran, the worker started under
    `settings` (default: those in effect).

    A worker that dies or hangs on the way is a CompilerError (with a reproducer: what the worker
    printed, and the command that discovers again), as on any other compiler call.
    """
    settings = settings or current()
    try:
        version, log = worker_pool.call_once(
            "discover_pipeline",
            {
                "TF_CPP_VMODULE": "hlo_pass_pipeline=1",
                "TF_CPP_MIN_LOG_LEVEL": "0",
                "TF_CPP_MAX_VLOG_LEVEL": "1",
            },
            timeout=timeout,
            compiler=compiler,
            settings=settings,
        )
    except worker_pool.CompilerFailure as failure:
        raise CompilerError("error", str(failure), DISCOVERY) from None
    except (worker_pool.WorkerDied, worker_pool.WorkerTimedOut) as failure:
        kind = "crash" if isinstance(failure, worker_pool.WorkerDied) else "timeout"
        reproducer = _discovery_reproducer(compiler, kind, str(failure), failure.stderr_tail, settings)
        raise CompilerError(
            kind, str(failure), DISCOVERY, None, failure.stderr_tail, reproducer, deterministic=False
        ) from None
    tree = parse_pipeline_log(log)
    if not tree:
        raise DriverError("XLA printed no pipeline log: the pass catalogue cannot be discovered", DISCOVERY)
    return classify(tree, version)


def _discovery_reproducer(
    compiler: Compiler, kind: str, message: str, stderr_tail: str, settings: Settings
) -> str | None:
    """error.json of a discovery that died or hung, in the crash directory; None if it cannot be written."""
    directory = os.path.join(crash_directory(settings), f"{kind}-discover-pipeline-{compiler.name}")
    details = {
        "kind": kind,
        "function": "discover_pipeline",
        "message": message,
        "stderr_tail": stderr_tail,
        "jaxlib": compiler.version,
        "compiler": compiler.name,
        "replay": f"xlabench passes --compiler {compiler.name}",
    }
    try:
        write_json(os.path.join(directory, "error.json"), details)
    except OSError as error:
        cache_unwritable(directory, error)
        return None
    return directory


_loaded: dict[str, PassCatalogue] = {}


def catalogue_path(compiler: Compiler, settings: Settings | None = None) -> str:
    """Where a compiler's discovered catalogue is kept, in the cache directory of `settings` (default:
    those in effect): one file per build (a rebuilt jaxlib rediscovers)."""
    return os.path.join(cache_directory(settings), f"catalogue-jaxlib-{compiler_build(compiler)}.json")


def load_catalogue(
    refresh: bool = False, compiler: Compiler | None = None, settings: Settings | None = None
) -> PassCatalogue:
    """A compiler's catalogue (default: the compiler of `settings`, default those in effect), from the
    cache or discovered and cached."""
    settings = settings or current()
    compiler = compiler or resolve_compiler(settings=settings)
    build = compiler_build(compiler)
    if build in _loaded and not refresh:
        return _loaded[build]
    path = catalogue_path(compiler, settings)
    if not refresh and os.path.exists(path):
        try:
            with open(path) as handle:
                data = json.load(handle)
            if data.get("format") == CATALOGUE_FORMAT:
                # Classes come from the tables in this file, so re-classify the cached tree.
                _loaded[build] = classify(data["tree"], data["jaxlib_version"])
                return _loaded[build]
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged cache is rediscovered
    catalogue = discover(compiler, settings=settings)
    try:
        write_atomically(path, json.dumps(catalogue.to_dict(), indent=1).encode())
    except OSError as error:  # discovered again by the next process
        cache_unwritable(path, error)
    _loaded[build] = catalogue
    return catalogue
