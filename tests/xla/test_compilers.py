"""Compilers side by side: adding a release, refusing what cannot be served, one adapter for every release."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from conftest import SECOND_RELEASE
from tests.commands import interrupt_after
from xlabench.cli import main
from xlabench.graphs import resolve_graphs
from xlabench.xla import PassDriver
from xlabench.xla.compilers import COMPILER_VARIABLE, COMPILERS_DIRECTORY_VARIABLE, resolve_compiler
from xlabench.xla.pool import CompilerPool
from xlabench.xla.releases import SUPPORTED_JAXLIB, UnsupportedCompiler

SMALL_GRAPH = "bert-infer-l1-d64-h2-s32-b2-f32"


@pytest.fixture
def compilers_root(tmp_path, monkeypatch) -> Path:
    """An empty folder for added compilers."""
    root = tmp_path / "compilers"
    monkeypatch.setenv(COMPILERS_DIRECTORY_VARIABLE, str(root))
    return root


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    return err.splitlines()[-1]


def test_a_release_outside_the_range_is_one_line_and_installs_nothing(compilers_root, capsys):
    assert main(["compilers", "add", "0.7.2"]) == 2
    assert _one_error_line(capsys) == (
        f"xlabench: error: jaxlib 0.7.2 is not supported: xlabench supports jaxlib {SUPPORTED_JAXLIB[0]} "
        f"to {SUPPORTED_JAXLIB[1]}"
    )
    assert not compilers_root.exists() or not any(compilers_root.iterdir())
    assert main(["compilers", "add", "latest"]) == 2
    assert "latest: not a jaxlib release number" in _one_error_line(capsys)


@pytest.mark.slow
def test_a_release_the_registry_does_not_have_leaves_nothing_behind(compilers_root, capsys):
    # In the supported range, but never published.
    assert main(["compilers", "add", "0.8.5"]) == 2
    assert (
        _one_error_line(capsys)
        == "xlabench: error: jaxlib 0.8.5: the package registry has no jax/jaxlib 0.8.5"
    )
    assert list(compilers_root.iterdir()) == []


@pytest.mark.slow
def test_an_interrupted_add_leaves_nothing_behind(compilers_root):
    # Ctrl-C while pip installs: the half-made environment is removed, nothing looks like a compiler.
    environment = {COMPILERS_DIRECTORY_VARIABLE: str(compilers_root)}
    code, last_line = interrupt_after(["compilers", "add", "0.9.2"], 120, environment, ready=r"\[2/3\]")
    assert (code, last_line) == (130, "xlabench: interrupted")
    assert list(compilers_root.iterdir()) == []


def test_a_compiler_not_added_or_broken_is_one_line(compilers_root, capsys):
    assert main(["stats", SMALL_GRAPH, "--compiler", "0.9.2"]) == 2
    assert (
        _one_error_line(capsys)
        == "xlabench: error: jaxlib 0.9.2 is not added: run `xlabench compilers add 0.9.2`"
    )
    (compilers_root / "0.9.2" / "bin").mkdir(parents=True)  # an add that was killed, or a deleted interpreter
    assert main(["passes", "--compiler", "0.9.2"]) == 2
    assert "jaxlib 0.9.2: the environment" in _one_error_line(capsys)
    assert main(["compilers", "remove", "0.9.2"]) == 0
    assert not (compilers_root / "0.9.2").exists()


def test_the_compiler_named_in_the_environment_is_checked_like_the_option(
    compilers_root, monkeypatch, capsys
):
    monkeypatch.setenv(COMPILER_VARIABLE, "0.6.0")
    assert main(["passes"]) == 2
    assert "jaxlib 0.6.0 is not supported" in _one_error_line(capsys)


def test_a_jaxlib_the_adapter_cannot_serve_is_named_never_a_bad_module(tmp_path, data_directory):
    # A jaxlib whose version is out of range, then one whose internals are missing: the worker says so.
    for version, expected in (("0.7.0", "jaxlib 0.7.0 is not supported"), ("0.9.0", "cannot import")):
        fake = tmp_path / version / "jaxlib"
        fake.mkdir(parents=True)
        (fake / "__init__.py").write_text(f'__version__ = "{version}"\n')
        pool = CompilerPool(environment={"PYTHONPATH": str(fake.parent)}, compiler=resolve_compiler())
        try:
            with pytest.raises(UnsupportedCompiler, match=expected) as error:
                PassDriver(pool=pool, use_cache=False).load((data_directory / "redundant.hlo").read_text())
            assert "not a valid HLO module" not in str(error.value)
        finally:
            pool.close()


@pytest.mark.slow
def test_an_added_release_serves_the_suite_with_the_same_features(second_compiler, compilers_root):
    assert second_compiler.version == SECOND_RELEASE and second_compiler.managed
    assert os.path.isfile(Path(second_compiler.python).parents[1] / "compiler.json")
    graph = resolve_graphs(SMALL_GRAPH)[0]
    pools = [CompilerPool(compiler=compiler) for compiler in (resolve_compiler(), second_compiler)]
    try:
        reference, other = (PassDriver(pool=pool) for pool in pools)
        assert other.jaxlib_version == SECOND_RELEASE
        modules = [driver.load(graph.hlo_text(), graph.name) for driver in (reference, other)]
        # The same module on both (features read from text, not from a release's Python API) ...
        assert modules[0].fingerprint == modules[1].fingerprint
        assert reference.features(modules[0]) == other.features(modules[1])
        # ... and each release's own pipeline, not the installed one's: 0.10.2 added passes.
        assert "gemv-rewriter" in reference.catalogue.passes and "gemv-rewriter" not in other.catalogue.passes
        assert not other.has_pass("gemv-rewriter") and other.has_pass("algsimp")
    finally:
        for pool in pools:
            pool.close()
