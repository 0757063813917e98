"""The policy executables' timed runs as pytest-benchmark results, in a serial run and under xdist.

pytest-benchmark switches itself off under xdist: its fixture times code in the test's own process,
which xdist shares with other tests. xlabench's runs are timed in a compiler worker, pinned to one
core and interleaved with XLA's default executable, so they mean as much under `-n auto` as serially.
Each gate sends its runs to the controller as a user property; there they become pytest-benchmark
results just before pytest-benchmark saves them (`--benchmark-save`, `--benchmark-autosave`,
`--benchmark-json`, in its own format and storage layout) and compares them (`--benchmark-compare`,
`--benchmark-compare-fail`). Only runs whose gate (c) judged them are kept: below the runtime floor a
run time measures dispatch, not code.

`--benchmark-compare` without `--benchmark-compare-fail` fails on DEFAULT_COMPARE_FAIL -- when the
reference run was made on a machine like this one (same CPU model and core count); against a run
from another machine the comparison is printed, not failed: absolute times do not travel.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

BENCHMARK_GROUP = "xlabench: policy executables"
PROPERTY_RUNS = "xlabench-runs"
GATE_TEST = "test_policy_on_graph"
# A policy executable's fastest run may take up to three times the reference run's fastest: two runs of
# the unchanged suite on a 2-vCPU machine gave per-graph median ratios of 0.55-2.06 (their runtime
# ratios to XLA's default: 0.84-1.26), and a CI run of unchanged code (2026-12-02) stayed above 3x in the
# median even when measured again. Load on a shared machine only adds time, so the fastest of the 20
# interleaved runs moves least with it; a slower executable is slower in every run. Absolute times catch
# gross slowdowns; gate (c) and the suite-wide geomean, both ratios, catch the rest.
DEFAULT_COMPARE_FAIL = "min:200%"
RULES = pytest.StashKey[list]()  # the fail rules of this session, once read

# pytest-benchmark offers no hook to add results measured elsewhere, so the hand-over uses its session
# object (`config._benchmarksession`): these attributes of it. Tested with 5.3.1 (pyproject.toml pins
# the 5.3 series); a release that moves them is refused in one line, not misread
# (tests/plugin/test_benchmarks.py checks them against the installed release).
TESTED_RELEASES = "5.3"
SESSION_ATTRIBUTES = (
    "benchmarks",
    "options",
    "compare",
    "compared_mapping",
    "compare_fail",
    "disabled",
    "skip",
    "xdist_benchmark_found",
    "get_machine_info",
)


def benchmark_session(config: pytest.Config) -> Any:
    """pytest-benchmark's session object, checked to have what the hand-over uses; None without the plugin.

    A release of pytest-benchmark whose session lacks one of SESSION_ATTRIBUTES stops the run in one
    line naming the release: the runtimes would otherwise be lost or misjudged silently.
    """
    bench_session = getattr(config, "_benchmarksession", None)
    if bench_session is None:
        return None
    missing = [name for name in SESSION_ATTRIBUTES if not hasattr(bench_session, name)]
    if missing:
        from importlib import metadata

        raise pytest.UsageError(
            f"xlabench: pytest-benchmark {metadata.version('pytest-benchmark')} has no "
            f"{', '.join(missing)} on its session: xlabench hands runtimes over through it and is tested "
            f"with pytest-benchmark {TESTED_RELEASES}.x (pip install 'pytest-benchmark>=5.3,<5.4')"
        )
    return bench_session


@dataclass
class BenchmarkRuns:
    """One gate's timed runs of the policy executable, as they travel from a worker to the controller."""

    name: str
    fullname: str
    param: str
    run_seconds: list[float]
    extra_info: dict[str, Any] = field(default_factory=dict)
    # Set when these runs are a re-measurement: the median of the first runs, which exceeded the reference.
    first_median_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data (user properties cross the xdist channel)."""
        return asdict(self)

    def metadata(self, options: dict[str, Any]) -> Any:
        """pytest-benchmark's record of these runs (what its own fixture would have made)."""
        from pytest_benchmark.stats import Metadata

        fixture = SimpleNamespace(
            name=self.name,
            fullname=self.fullname,
            group=BENCHMARK_GROUP,
            param=self.param,
            params={"xlabench_case": self.param},
            extra_info=(
                self.extra_info
                if self.first_median_seconds is None
                else {**self.extra_info, "first_median_seconds": self.first_median_seconds}
            ),
            cprofile_stats=None,
            has_error=False,
        )
        record = Metadata(fixture, iterations=1, options={**options, "timer": "xlabench compiler worker"})
        for seconds in self.run_seconds:
            record.update(seconds)
        return record


class Benchmarks:
    """Gathers the gates' runs (on the controller) and hands them to pytest-benchmark's session."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.runs: list[BenchmarkRuns] = []
        self.note: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep the runs a gate recorded."""
        if report.when == "call":
            self.runs += [
                BenchmarkRuns(**value) for name, value in report.user_properties if name == PROPERTY_RUNS
            ]

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """pytest-benchmark warns that xdist turned benchmarks off: not true of the gates, so when they
        are the only benchmarks (in an xdist worker) the warning goes."""
        bench_session = benchmark_session(self.config)
        using = [item for item in items if "benchmark" in getattr(item, "fixturenames", ())]
        if bench_session is not None and using and all(item.name.startswith(GATE_TEST) for item in using):
            bench_session.xdist_benchmark_found = False

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> Any:
        """Before pytest-benchmark saves and compares: give it the runs."""
        self.hand_over()
        yield

    def hand_over(self) -> None:
        """Add the runs to pytest-benchmark's session (re-enabled under xdist); set the default fail rule."""
        config = self.config
        bench_session = benchmark_session(config)
        if bench_session is None or hasattr(config, "workerinput") or not self.runs:
            return
        if (config.getoption("benchmark_disable") and not config.getoption("benchmark_enable")) or (
            bench_session.skip
        ):
            return  # the user turned benchmarks off
        if config.getoption("dist", "no") != "no":
            # Turned off only for xdist: these runs were not timed in the xdist workers' own processes.
            bench_session.disabled = False
            bench_session.xdist_benchmark_found = False
        bench_session.benchmarks += [runs.metadata(bench_session.options) for runs in self.runs]
        if bench_session.compare and bench_session.compared_mapping and not bench_session.compare_fail:
            bench_session.compare_fail, self.note = fail_rules(bench_session)
        remeasured = [runs for runs in self.runs if runs.first_median_seconds is not None]
        if remeasured and bench_session.compare_fail:
            still = [runs for runs in remeasured if regressions(config, runs)]
            self.note = (
                (f"{self.note}; " if self.note else "")
                + f"{len(remeasured)} run(s) above the reference measured again, {len(still)} still above it"
                + "".join(f"\n  {describe_remeasured(config, runs)}" for runs in still)
            )

    @pytest.hookimpl(tryfirst=True)  # before pytest-benchmark's summary, which raises on a regression
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        """Say how the comparison judged (or why it did not)."""
        if self.note and not hasattr(self.config, "workerinput"):
            terminalreporter.write_line(f"xlabench: {self.note}")


def fail_rules(bench_session: Any) -> tuple[list[Any], str | None]:
    """The rules --benchmark-compare fails on (the user's, else xlabench's default on a like machine),
    and a note saying which."""
    from pytest_benchmark.utils import parse_compare_fail

    if bench_session.compare_fail:
        return list(bench_session.compare_fail), None
    others = _other_machines(bench_session)
    if others:
        return [], (
            f"the reference run was made on another machine ({others[0]}): compared, not failed; "
            "make one here with --benchmark-save=NAME"
        )
    return [parse_compare_fail(DEFAULT_COMPARE_FAIL)], (
        f"--benchmark-compare fails at {DEFAULT_COMPARE_FAIL} (xlabench's default)"
    )


def regressions(config: pytest.Config, runs: BenchmarkRuns) -> list[str]:
    """How these runs fail the compared reference runs under the fail rules (none: empty)."""
    bench_session = benchmark_session(config)
    if bench_session is None or not bench_session.compare or not bench_session.compared_mapping:
        return []
    if RULES not in config.stash:  # reading the machine's description takes a fraction of a second
        config.stash[RULES] = fail_rules(bench_session)[0]
    rules = config.stash[RULES]
    current = runs.metadata(bench_session.options)
    found = []
    for mapping in bench_session.compared_mapping.values():
        compared = mapping.get(runs.fullname)
        if compared is not None:
            found += [failure for rule in rules if (failure := rule.fails(current, compared["stats"]))]
    return found


def describe_remeasured(config: pytest.Config, runs: BenchmarkRuns) -> str:
    """A run that stayed above the reference, in a line: its two medians, the reference's, XLA's default's."""
    bench_session = benchmark_session(config)
    mappings = bench_session.compared_mapping.values() if bench_session is not None else []
    reference = [mapping[runs.fullname]["stats"] for mapping in mappings if runs.fullname in mapping]
    median = statistics.median(runs.run_seconds)
    default = runs.extra_info.get("default_median_seconds")
    compared = ", ".join(f"{_ms(stats['median'])} (fastest {_ms(stats['min'])})" for stats in reference)
    return (
        f"{runs.param}: median {_ms(runs.first_median_seconds)}, then {_ms(median)} "
        f"(fastest {_ms(min(runs.run_seconds))}); reference {compared or '?'}; "
        f"XLA's default now {_ms(default)}"
    )


def _ms(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds * 1e3:.3g} ms"


def _machine(info: dict[str, Any]) -> tuple[str, Any]:
    cpu = info.get("cpu") or {}
    return str(cpu.get("brand_raw") or info.get("processor") or "?"), cpu.get("count")


def _other_machines(bench_session: Any) -> list[str]:
    """The compared runs made on a machine unlike this one (CPU model, core count), described."""
    here = _machine(bench_session.get_machine_info())
    others = []
    for path in bench_session.compared_mapping:
        try:
            there = _machine(json.loads(Path(path).read_text()).get("machine_info") or {})
        except (OSError, ValueError):
            continue
        if there != here:
            others.append(f"{there[0]}, {there[1]} cores, in {Path(path).name}")
    return others
