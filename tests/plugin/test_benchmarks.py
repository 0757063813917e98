"""pytest-benchmark's private session state, which the runtime hand-over uses: checked, never misread."""

from __future__ import annotations

from importlib import metadata
from types import SimpleNamespace

import pytest

from xlabench.plugin.benchmarks import SESSION_ATTRIBUTES, TESTED_RELEASES, benchmark_session


def test_the_installed_pytest_benchmark_is_a_tested_release_with_the_session_state_used(pytestconfig):
    # Fails loudly when pytest-benchmark moves: the pin in pyproject.toml and this list move together.
    assert metadata.version("pytest-benchmark").startswith(TESTED_RELEASES + ".")
    bench_session = pytestconfig._benchmarksession
    assert [name for name in SESSION_ATTRIBUTES if not hasattr(bench_session, name)] == []
    assert benchmark_session(pytestconfig) is bench_session


def test_a_release_without_that_state_is_refused_in_one_line():
    moved = SimpleNamespace(**{name: None for name in SESSION_ATTRIBUTES if name != "xdist_benchmark_found"})
    with pytest.raises(pytest.UsageError, match=r"has no xdist_benchmark_found on its session.*5\.3\.x"):
        benchmark_session(SimpleNamespace(_benchmarksession=moved))
    assert benchmark_session(SimpleNamespace()) is None  # no pytest-benchmark: no runtimes to hand over
