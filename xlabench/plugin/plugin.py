"""The xlabench pytest plugin (auto-loaded through the `pytest11` entry point when xlabench is installed).

It parametrizes `test_policy_on_graph` (in `xlabench.plugin.suite`; a test module collects it by
importing it) over every graph of `--xlabench-graphs` and every policy under `policies/` (latest
version, or `--xlabench-policy NAME[@vX.Y]`), judges each pair with the gates of
`xlabench.plugin.gates`, runs the Hypothesis semantics check, and ends the session with a table of
graph, policy, op count and runtime ratio, baseline -> now, sorted by damage (`--xlabench-report FILE`
writes it as JSON). `--xlabench-disable-pass NAME` turns a pass off in every compile: a compiler change.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from xlabench.baselines.baseline_diff import MIN_RUN_SECONDS, Tolerances, runtime_judged
from xlabench.baselines.baseline_store import baselines_directory, load, made_with
from xlabench.baselines.gate_judgement import KNOWN_GAPS_FILE, judge, load_known_gaps, split_known
from xlabench.errors import CompilerError, DriverError, UserInputError
from xlabench.eval.evaluation_records import figure
from xlabench.files import write_json
from xlabench.graphs import resolve_graphs
from xlabench.plugin.benchmarks import Benchmarks
from xlabench.plugin.gates import GEOMEAN_MIN_GATES, Verdict, judge_geomean, measure, runtime_geomean
from xlabench.plugin.semantics import known_miscompiles
from xlabench.policies.artifact import (
    gated_graphs,
    policies_directory,
    policy_names,
    read_metadata,
    resolve,
)
from xlabench.policies.policy import load_policy
from xlabench.settings import Settings, from_environment
from xlabench.xla import PassDriver
from xlabench.xla.compilers.named_compilers import resolve_compiler
from xlabench.xla.compilers.worker_pool import CompilerPool
from xlabench.xla.diagnosis.attribution import attribute_default, attribute_sequence
from xlabench.xla.shared.releases import compiler_title

if TYPE_CHECKING:
    from xlabench.baselines.baseline_records import BaselineEntry
    from xlabench.eval.evaluation_records import EvaluationRow

PROPERTY_VERDICT = "xlabench-verdict"
PROPERTY_COVERAGE = "xlabench-coverage"


@dataclass(frozen=True)
class SuiteOptions:
    """The plugin's options, read once per process; `settings` is xlabench's (`xlabench.settings`): the
    environment's with the plugin's directories, compiler and disabled passes laid over them."""

    settings: Settings
    graphs: str
    graphs_given: bool
    policies: tuple[str, ...]
    report: str | None
    tolerances: Tolerances
    repeats: int
    min_run_seconds: float
    # False with --xlabench-no-runtime: gate (c) is off (outputs are still compared, gate (d)).
    runtime: bool
    examples: int
    seed: int

    @property
    def policies_root(self) -> Path:
        """The policies directory judged from."""
        return policies_directory(self.settings)

    @property
    def baselines_root(self) -> Path:
        """The baselines directory judged against."""
        return baselines_directory(self.settings)


@dataclass(frozen=True)
class Case:
    """One parametrization: a graph and a policy version."""

    graph: Any
    policy_reference: str
    policy_label: str


OPTIONS = pytest.StashKey[SuiteOptions]()

# The tiers, each judging fully what it runs: `pytest -m smoke` is every test not marked slow plus one
# gate per family and policy (on the family's smallest graph, runtime gate included); `-m "not
# exhaustive"` (the README's test command, CI) is every test plus one gate per kind of suite graph
# (`Graph.kind`: family, architecture, mode, dtype) and policy, on its smallest graph; no -m runs all.
MARKERS = (
    "slow: long-running; left out of `-m smoke` (the suite's gates beyond one per family and policy, "
    "training, compiler changes, pytest-in-pytest runs)",
    "smoke: the fast tier (`pytest -m smoke -n auto`): every test not marked slow, and one suite gate per "
    "graph family and policy, on the family's smallest graph",
    "exhaustive: a suite gate beyond the smallest graph of its kind (family, architecture, mode, dtype) "
    "and policy; `-m 'not exhaustive'` leaves them out (the README's test command), no -m runs them",
)


def pytest_addoption(parser: pytest.Parser) -> None:
    """The --xlabench-* options (defaults documented in the README)."""
    defaults = Tolerances()
    group = parser.getgroup("xlabench", "xlabench: pass-ordering policies against XLA's default pipeline")
    group.addoption(
        "--xlabench-graphs",
        metavar="SPEC",
        help="graphs to judge every policy on: all, a split, a family, a graph, a directory of .hlo files or "
        "an XLA dump (--xla_dump_to); default: each policy's scope (all graphs, or the families it was "
        "trained on)",
    )
    group.addoption(
        "--xlabench-policy",
        action="append",
        default=[],
        metavar="NAME[@vX.Y]",
        help="judge this policy (repeatable); default: the latest version of every policy under policies/",
    )
    group.addoption(
        "--xlabench-disable-pass",
        action="append",
        default=[],
        metavar="NAME",
        help="turn this XLA pass off in every compile -- default pipeline, required passes, executables -- "
        "to simulate a compiler change (repeatable)",
    )
    group.addoption("--xlabench-report", metavar="FILE", help="write the session's summary table as JSON")
    group.addoption(
        "--xlabench-op-tolerance",
        type=float,
        default=defaults.op_count,
        help=f"gate (a): R <= D x (1 + this) (default {defaults.op_count})",
    )
    group.addoption(
        "--xlabench-runtime-tolerance",
        type=float,
        default=defaults.runtime,
        help=f"gate (c): policy/default runtime <= 1 + this (default {defaults.runtime})",
    )
    group.addoption(
        "--xlabench-runtime-noise",
        type=float,
        default=defaults.runtime_noise,
        help=f"gate (c): runtime ratio <= baseline ratio x (1 + this) (default {defaults.runtime_noise})",
    )
    group.addoption(
        "--xlabench-runtime-floor",
        type=float,
        default=defaults.runtime_floor_ms,
        metavar="MS",
        help="gate (c) judges only executables whose XLA default runs at least this long "
        f"(fastest run; default {defaults.runtime_floor_ms} ms: shorter ones measure dispatch, not code)",
    )
    group.addoption(
        "--xlabench-geomean-tolerance",
        type=float,
        default=defaults.runtime_geomean,
        help="suite-wide runtime gate: the geomean of policy/default over the runtime-judged gates <= 1 + "
        f"this, and <= the baselines' geomean x (1 + this); judged over {GEOMEAN_MIN_GATES} gates or more "
        f"(default {defaults.runtime_geomean})",
    )
    group.addoption(
        "--xlabench-repeats", type=int, default=20, help="timed runs of each executable (default 20)"
    )
    group.addoption(
        "--xlabench-min-run-time",
        type=float,
        default=MIN_RUN_SECONDS,
        metavar="SECONDS",
        help=f"time each executable at least this long in all, past the repeats (default {MIN_RUN_SECONDS})",
    )
    group.addoption(
        "--xlabench-no-runtime",
        action="store_true",
        help="turn the runtime gate (c) off: executables are still compiled, run once and their outputs "
        "compared (gate d), but not timed; the summary says so",
    )
    group.addoption(
        "--xlabench-baselines",
        metavar="DIR",
        help="baselines directory (default: the ini key xlabench_baselines, $XLABENCH_BASELINES_DIR, "
        "baselines/ in pytest's rootdir, the checkout's baselines/, or baselines/ in the current directory)",
    )
    group.addoption(
        "--xlabench-policies",
        metavar="DIR",
        help="policies directory (default: the ini key xlabench_policies, $XLABENCH_POLICIES_DIR, "
        "policies/ in pytest's rootdir, the checkout's policies/, or the policies shipped in the package)",
    )
    parser.addini("xlabench_baselines", "baselines directory, relative to the rootdir (--xlabench-baselines)")
    parser.addini("xlabench_policies", "policies directory, relative to the rootdir (--xlabench-policies)")
    group.addoption(
        "--xlabench-compiler",
        metavar="NAME",
        help="judge the policies and the stored baselines with this compiler (a release, or a name added "
        "with `xlabench compilers add`): a regression names the pass that made it",
    )
    group.addoption(
        "--xlabench-examples",
        type=int,
        default=12,
        help="Hypothesis examples of the semantics check, beyond the ones that cover every pass (default 12)",
    )
    group.addoption("--xlabench-seed", type=int, default=0, help="Hypothesis seed (default 0)")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register xlabench's hooks (`xlabench.plugin.hookspec`) for users' conftest.py files and plugins."""
    from xlabench.plugin import hookspec

    pluginmanager.add_hookspecs(hookspec)


def pytest_configure(config: pytest.Config) -> None:
    """Read the options, check the ones given, register the session summary."""
    option = config.getoption
    try:
        environment = from_environment()
    except UserInputError as error:
        raise pytest.UsageError(f"xlabench: {error}") from None
    # Passed down to what the plugin makes (judge, cases, semantics check); xdist workers resolve alike.
    settings = environment.with_options(
        baselines_directory=_directory_option(config, "xlabench_baselines", environment.baselines_directory),
        policies_directory=_directory_option(config, "xlabench_policies", environment.policies_directory),
        compiler=option("xlabench_compiler"),
        disabled_passes=tuple(option("xlabench_disable_pass")) or None,
    )
    options = SuiteOptions(
        settings=settings,
        graphs=option("xlabench_graphs") or "all",
        graphs_given=option("xlabench_graphs") is not None,
        policies=tuple(option("xlabench_policy")),
        report=option("xlabench_report"),
        tolerances=Tolerances(
            option("xlabench_op_tolerance"),
            option("xlabench_runtime_tolerance"),
            option("xlabench_runtime_noise"),
            option("xlabench_runtime_floor"),
            option("xlabench_geomean_tolerance"),
        ),
        repeats=option("xlabench_repeats"),
        min_run_seconds=option("xlabench_min_run_time"),
        runtime=not option("xlabench_no_runtime"),
        examples=option("xlabench_examples"),
        seed=option("xlabench_seed"),
    )
    config.stash[OPTIONS] = options
    for marker in MARKERS:
        config.addinivalue_line("markers", marker)
    config.pluginmanager.register(SessionSummary(config), "xlabench-summary")
    config.pluginmanager.register(Benchmarks(config), "xlabench-benchmarks")
    _check_given_options(config, options)


def _directory_option(config: pytest.Config, name: str, from_environment: Path | None) -> Path | None:
    """A directory from the option (relative to the working directory), the ini key (to the rootdir),
    the environment's, else `policies/` or `baselines/` in the rootdir when there is one: wherever
    pytest is started in a project, its own baselines and policies are the ones judged by."""
    given = config.getoption(name)
    if given:
        return Path(given).resolve()
    configured = config.getini(name)
    if configured:
        return (config.rootpath / configured).resolve()
    in_root = config.rootpath / name.removeprefix("xlabench_")
    return from_environment or (in_root.resolve() if in_root.is_dir() else None)


def _check_given_options(config: pytest.Config, options: SuiteOptions) -> None:
    """A mistyped graph SPEC, policy or pass stops pytest at once with one line (only options given:
    a plain `pytest` in a project without policies must not fail for the plugin being installed), and
    so does a known-gaps.toml that would not apply (one line a problem)."""

    try:
        # A known-gaps file that would not apply stops the session too, not each case that reads it.
        settings = options.settings
        load_known_gaps(options.baselines_root / KNOWN_GAPS_FILE, options.policies_root)
        compiler = resolve_compiler(settings=settings) if settings.compiler else None
        if options.policies or options.graphs_given:
            suite_cases(options)
        if config.getoption("xlabench_disable_pass"):  # given: checked now, not at the first gate
            PassDriver(use_cache=False, compiler=compiler, settings=settings).check_disabled_passes()
    except UserInputError as error:
        raise pytest.UsageError(f"xlabench: {error}") from None


def suite_cases(options: SuiteOptions, added: list[Any] = ()) -> list[Case]:
    """Graphs x policies (given, or the latest of each under policies/). Without `--xlabench-graphs`,
    each policy is judged on its scope (`graph_scope`): a policy trained on one family, on that family.
    `added` (from the `pytest_xlabench_add_graphs` hook) goes with every policy."""

    root = options.policies_root
    references = list(options.policies) or policy_names(root)
    if not references:
        raise UserInputError(f"no policies in {root} (train one with `xlabench retrain`)")
    given = resolve_graphs(options.graphs)
    cases = []
    for reference in references:
        metadata = read_metadata(resolve(reference, root))
        graphs = given if options.graphs_given else gated_graphs(metadata)
        named = {graph.name for graph in graphs}
        graphs = [*graphs, *(graph for graph in added if graph.name not in named)]
        cases += [Case(graph, reference, f"{metadata['name']}@{metadata['version']}") for graph in graphs]
    return cases


def added_graphs(config: pytest.Config) -> list[Any]:
    """The graphs users' `pytest_xlabench_add_graphs` hooks add, in order, each name once."""
    added: dict[str, Any] = {}
    for answer in config.hook.pytest_xlabench_add_graphs(config=config):
        for graph in answer or []:
            added.setdefault(graph.name, graph)
    return list(added.values())


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize `xlabench_case` over graphs x policies (ids name both), `xlabench_miscompile` over
    the stored reproducers of known miscompiles."""

    if "xlabench_miscompile" in metafunc.fixturenames:
        try:
            known: list[Any] = known_miscompiles(metafunc.config.stash[OPTIONS].baselines_root)
        except UserInputError as error:
            known = [UnusableSuite(str(error))]
        if not known:
            none = pytest.mark.skip(reason="no known miscompiles stored (baselines/miscompiles/)")
            known = [pytest.param(None, marks=none, id="none")]
        metafunc.parametrize(
            "xlabench_miscompile", known, ids=[getattr(item, "name", "unusable") for item in known]
        )
    if "xlabench_case" not in metafunc.fixturenames:
        return

    try:
        cases = suite_cases(metafunc.config.stash[OPTIONS], added_graphs(metafunc.config))
    except UserInputError as error:
        # Given options were checked at start-up; what is left (no policies at all) fails one test.
        metafunc.parametrize("xlabench_case", [UnusableSuite(str(error))], ids=["unusable"])
        return
    # Largest graphs first: xdist hands tests out in this order, so no big graph is left for the end.
    cases.sort(key=lambda case: -case.graph.instruction_count)
    ids = [f"{case.graph.name}|{case.policy_label}" for case in cases]
    metafunc.parametrize("xlabench_case", cases, ids=ids)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tiers: a suite gate is smoke when its graph is the smallest of its family for its policy,
    else slow, and exhaustive when it is not the smallest of its kind either (only the suite's stored
    graphs are: a user's files and modules by others never are);
    any other test is smoke unless it is marked slow."""
    smallest: dict[tuple[str, ...], tuple[int, str]] = {}
    for item in items:
        case = _case_of(item)
        if case is not None:
            candidate = (case.graph.instruction_count, case.graph.name)
            for key in _tier_keys(case):
                smallest[key] = min(smallest.get(key, candidate), candidate)
    for item in items:
        case = _case_of(item)
        if case is None:
            if item.get_closest_marker("slow") is None:
                item.add_marker(pytest.mark.smoke)
            continue
        of_family, of_kind = (smallest[key][1] == case.graph.name for key in _tier_keys(case))
        item.add_marker(pytest.mark.smoke if of_family else pytest.mark.slow)
        if not of_kind and case.graph.is_stored_suite_graph:  # what a user names is always gated
            item.add_marker(pytest.mark.exhaustive)


def _tier_keys(case: Case) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What a gate is the smallest of, or not: its policy and family; its policy and kind of graph."""
    return (case.policy_label, case.graph.family), (case.policy_label, *case.graph.kind)


def _case_of(item: pytest.Item) -> Case | None:
    """The graph x policy a collected suite gate judges, or None for any other test."""
    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("xlabench_case") if callspec is not None else None
    return case if isinstance(case, Case) else None


@dataclass(frozen=True)
class UnusableSuite:
    """Stands in for the cases when there are none to make: why."""

    reason: str


class Judge:
    """Per process: one compiler driver, policies and baselines loaded once, a verdict per case."""

    def __init__(self, options: SuiteOptions, hook: Any = None) -> None:

        self.options = options
        settings = options.settings
        self.hook = (
            hook  # the session's pytest hooks (`pytest_xlabench_gate_tolerances`), None outside pytest
        )
        # One compiler worker per pytest worker (-n auto fills the cores), of the compiler under test.
        self.pool = CompilerPool(size=1, compiler=resolve_compiler(settings=settings), settings=settings)
        # The simulated compiler change is this driver's alone: other tests in the session keep the compiler.
        self.driver = PassDriver(pool=self.pool, settings=settings)
        self._policies: dict[str, Any] = {}
        self._baselines: dict[str, Any] = {}
        self._reference: dict[str, Any] = {}  # compiler name -> (pool, driver) of a baseline's own compiler
        self._known_gaps: list[Any] | None = None
        self._scopes: dict[str, set[str]] = {}

    def policy(self, reference: str) -> Any:
        """The verified policy (loaded once)."""

        if reference not in self._policies:
            self._policies[reference] = load_policy(reference, self.driver, self.options.policies_root)
        return self._policies[reference]

    def baselines(self, policy: Any) -> Any:
        """The policy's stored baselines, or None; made with any jaxlib (judging a change is the point)."""

        name = policy.artifact.metadata["name"]
        if name not in self._baselines:
            self._baselines[name] = load(
                name, policy.label, self.driver.compiler.name, True, self.options.baselines_root
            )
        return self._baselines[name]

    def in_scope(self, policy: Any, graph: str) -> bool:
        """Whether a suite graph is in the policy's scope (`graph_scope`), where a baseline is required."""

        if policy.label not in self._scopes:
            # A staged family's graph is judged as a user's graph is: without a baseline to require.
            self._scopes[policy.label] = {graph.name for graph in gated_graphs(policy.artifact.metadata)}
        return graph in self._scopes[policy.label]

    def known_gaps(self) -> list[Any]:
        """The reviewed gaps of `known-gaps.toml` in the baselines directory (read once)."""

        if self._known_gaps is None:
            root = self.options.baselines_root
            self._known_gaps = load_known_gaps(root / KNOWN_GAPS_FILE, self.options.policies_root)
        return self._known_gaps

    def changed_by(self, case: Case, row: EvaluationRow, baseline: BaselineEntry, made: str) -> str | None:
        """The pass that made R or D differ from the baseline's own compiler `made` (a name; when that one
        can run here)."""

        if made == self.driver.compiler.name or self.driver.disabled_passes:
            return None
        try:
            if made not in self._reference:
                settings = self.options.settings
                pool = CompilerPool(size=1, compiler=resolve_compiler(made, settings), settings=settings)
                self._reference[made] = (pool, PassDriver(pool=pool, settings=settings))
            reference = self._reference[made][1]
            text = case.graph.hlo_text()
            found = None
            if row.policy_ops != baseline.policy_ops or row.sequence != baseline.sequence:
                found = attribute_sequence(
                    reference, self.driver, text, case.graph.name, baseline.sequence or []
                )
            if found is None and baseline.default_ops is not None and row.default_ops != baseline.default_ops:
                found = attribute_default(reference, self.driver, text, case.graph.name)
        except (CompilerError, DriverError, UserInputError) as error:
            return f"not attributed: {error}"
        return (
            None
            if found is None
            else f"{compiler_title(made)} -> {self.driver.compiler.name}: {found.describe()}"
        )

    def verdict(self, case: Case) -> Any:
        """Measure the case and judge it against XLA's default and the stored baseline."""

        if isinstance(case, UnusableSuite):
            pytest.fail(f"xlabench: {case.reason}", pytrace=False)
        try:
            policy = self.policy(case.policy_reference)
            stored = self.baselines(policy)
            baseline = stored.get(case.graph.name) if stored is not None else None
            self.driver.check_disabled_passes()
            gaps = [gap for gap in self.known_gaps() if gap.covers(case.graph.name, policy.label)]
            in_scope = self.in_scope(policy, case.graph.name)
        except UserInputError as error:
            pytest.fail(f"xlabench: {error}", pytrace=False)
        options = self.options
        tolerances = options.tolerances
        if self.hook is not None:
            chosen = self.hook.pytest_xlabench_gate_tolerances(
                graph=case.graph, policy=policy.label, tolerances=tolerances
            )
            tolerances = chosen if chosen is not None else tolerances
        if options.runtime:
            row = measure(self.driver, case.graph, policy, options.repeats, options.min_run_seconds)
        else:  # gate (c) off: both executables still run once, for gate (d); no ratio to judge
            row = measure(self.driver, case.graph, policy, repeats=1, min_run_seconds=0.0)
            row.runtime_ratio, row.run_seconds = None, None
        failures = judge(row, baseline, tolerances)
        if any(failure.startswith("runtime") for failure in failures):
            # Runtimes are noisy on a busy machine: a runtime failure stands only if a second measurement
            # (the rollout comes from the cache, the executables are compiled and timed again) shows it too.
            again = measure(
                self.driver, case.graph, policy, self.options.repeats, self.options.min_run_seconds
            )
            confirmed = judge(again, baseline, tolerances)
            if not any(failure.startswith("runtime") for failure in confirmed):
                row, failures = again, confirmed
            else:
                row.runtime_ratios_measured = [row.runtime_ratio, again.runtime_ratio]
        if stored is not None and baseline is None and in_scope:
            # A suite graph in the policy's scope with nothing to hold it to would pass gate (b) unjudged.
            failures.append(
                f"no baseline for {case.graph.name} (run `xlabench baselines update --policy "
                f"{policy.artifact.metadata['name']} --graphs {case.graph.name}`)"
            )
        origin, changed_by = None, None
        if baseline is not None:
            origin = f"{stored.directory} ({stored.policy}, {compiler_title(made_with(stored.metadata))})"
            if failures:
                changed_by = self.changed_by(case, row, baseline, made_with(stored.metadata))
        verdict = Verdict(
            case.graph.name,
            policy.label,
            self.driver.compiler.name,
            self.driver.disabled_passes,
            row,
            baseline,
            origin,
            changed_by=changed_by,
        )
        verdict.runtime_judged = self.options.runtime and runtime_judged(row, tolerances)
        verdict.failures, verdict.known, matched = split_known(failures, gaps, verdict.runtime_judged)
        verdict.known_reasons = [gap.describe() for gap in matched]
        return verdict

    def close(self) -> None:
        """Stop the compiler workers."""
        self.pool.close()
        for pool, _ in self._reference.values():
            pool.close()


@pytest.fixture(scope="session")
def xlabench_judge(pytestconfig: pytest.Config) -> Any:
    """This process's Judge (compiler driver, policies, baselines)."""
    judge = Judge(pytestconfig.stash[OPTIONS], pytestconfig.hook)
    yield judge
    judge.close()


@pytest.fixture(scope="session")
def xlabench_options(pytestconfig: pytest.Config) -> SuiteOptions:
    """The plugin's options (with xlabench's settings, `.settings`)."""
    return pytestconfig.stash[OPTIONS]


class SessionSummary:
    """Collects verdicts and coverage (from xdist workers too: they travel as user properties) and
    prints the summary table on the controller."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.verdicts: list[dict[str, Any]] = []
        self.coverage: dict[str, Any] = {}
        self.geomean_failures: list[str] = []

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """The suite-wide runtime gate, over every verdict of the session: a failure fails the run."""

        if hasattr(self.config, "workerinput"):
            return
        geomean = runtime_geomean(self.verdicts)
        if geomean is not None:
            self.geomean_failures = judge_geomean(geomean, self.config.stash[OPTIONS].tolerances)
        if self.geomean_failures and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep what the test recorded."""
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == PROPERTY_VERDICT:
                self.verdicts.append(value)
            elif name == PROPERTY_COVERAGE:
                self.coverage = value

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Graph, policy, op count and runtime ratio (baseline -> now), sorted by damage; the JSON report."""

        if hasattr(self.config, "workerinput"):
            return
        if self.coverage:
            counts = self.coverage["counts"]
            low, high = min(counts.values(), default=0), max(counts.values(), default=0)
            terminalreporter.write_sep("-", "xlabench: Hypothesis semantics check")
            terminalreporter.write_line(
                f"{self.coverage['examples']} examples; {sum(1 for n in counts.values() if n)} of "
                f"{len(counts)} action passes applied by XLA (runs per pass: min {low}, max {high})"
                + (
                    f"; {self.coverage['flagged']} flagged, not compared (default outputs mostly NaN, or "
                    "inputs outside the program's domain)"
                    if self.coverage.get("flagged")
                    else ""
                )
            )
        options = self.config.stash[OPTIONS]
        disabled = options.settings.disabled_passes
        verdicts = sorted(
            self.verdicts, key=lambda verdict: (-verdict["damage"], verdict["graph"], verdict["policy"])
        )
        if options.report:
            document = {"disabled_passes": list(disabled), "results": verdicts}
            write_json(options.report, document)
        if not verdicts:
            return
        change = f", {', '.join(disabled)} disabled" if disabled else ""
        change += f", on {compiler_title(verdicts[0]['compiler'])}" if verdicts else ""
        change += "" if options.runtime else ", runtime gate off (--xlabench-no-runtime)"
        failed = sum(1 for verdict in verdicts if verdict["failures"])
        known = sum(1 for verdict in verdicts if verdict.get("known") and not verdict["failures"])
        terminalreporter.write_sep(
            "-",
            f"xlabench: {len(verdicts)} graph x policy, {failed} failed, {known} known gaps{change}",
        )
        terminalreporter.write_line(
            f"{'graph':44} {'policy':14} {'op count (baseline -> now)':>27} {'vs D':>7} "
            f"{'runtime ratio':>17}  failed gates"
        )
        shown = [verdict for verdict in verdicts if verdict["failures"] or verdict.get("known")] or verdicts[
            :10
        ]
        for verdict in shown:
            terminalreporter.write_line(_summary_line(verdict))
        if len(shown) < len(verdicts):
            hidden = [verdict for verdict in verdicts if verdict not in shown]
            unjudged = sum(1 for verdict in hidden if not verdict.get("runtime_judged", True))
            unbased = sum(1 for verdict in hidden if verdict["baseline_R"] is None)
            # Only what was judged passed: say what was not (runtime under the floor, no baseline).
            caveats = ""
            if unjudged and not options.runtime:
                caveats += "; runtime not judged (--xlabench-no-runtime)"
            elif unjudged:
                caveats += f"; {unjudged} with runtime not judged"
            if unbased:
                caveats += f"; {unbased} without a baseline"
            terminalreporter.write_line(f"... {len(hidden)} more (every gate judged passed{caveats})")
        geomean = runtime_geomean(verdicts)
        if geomean is not None:
            now, before, gates = geomean
            outcome = "; ".join(self.geomean_failures) or "ok"
            terminalreporter.write_line(
                f"suite-wide runtime: geomean policy/default {now:.3f} over {gates} gates"
                + (f" (baselines {before:.3f})" if before is not None else "")
                + f": {'FAILED ' if self.geomean_failures else ''}{outcome}"
            )
        if options.report:
            terminalreporter.write_line(f"xlabench: report written to {options.report}")


def _summary_line(verdict: dict[str, Any]) -> str:
    """One verdict summary (`Verdict.summary`, as it travelled from a worker) as a line of the table."""

    ops = f"{figure(verdict['baseline_R'], 0)} -> {figure(verdict['R'], 0)}"
    if verdict["baseline_R"] and verdict["R"] is not None and verdict["R"] != verdict["baseline_R"]:
        ops += f" ({(verdict['R'] - verdict['baseline_R']) / verdict['baseline_R']:+.1%})"
    versus = figure(verdict["D"] / verdict["R"]) if verdict["R"] and verdict["D"] else "-"
    runtime = f"{figure(verdict['baseline_runtime_ratio'], 2)} -> {figure(verdict['runtime_ratio'], 2)}"
    gates = "; ".join(failure.split(":", 1)[0] for failure in verdict["failures"])
    known = "; ".join(f"known: {failure.split(':', 1)[0]}" for failure in verdict.get("known", []))
    gates = "; ".join(part for part in (gates, known) if part) or "ok"
    fastest = verdict.get("default_fastest_ms", verdict.get("default_ms"))
    if not verdict.get("runtime_judged", True) and fastest is not None:
        gates += f" (runtime not judged: default's fastest run {figure(fastest, 3)} ms)"
    if verdict["baseline_R"] is None:
        gates += " (no baseline)"
    if verdict.get("changed_by"):
        gates += f"; changed by {verdict['changed_by']}"
    return (
        f"{verdict['graph'][:44]:44} {verdict['policy'][:14]:14} {ops:>27} {versus:>7} {runtime:>17}  {gates}"
    )
