"""Compilers side by side: adding a release, refusing what cannot be served, one adapter for every release."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SECOND_RELEASE
from tests.commands import interrupt_after
from xlabench.cli import main
from xlabench.errors import UserInputError
from xlabench.graphs import resolve_graphs
from xlabench.xla import PassDriver
from xlabench.xla.compilers.named_compilers import (
    COMPILER_VARIABLE,
    COMPILERS_DIRECTORY_VARIABLE,
    resolve_compiler,
)
from xlabench.xla.compilers.worker_pool import CompilerPool
from xlabench.xla.shared.releases import REFERENCE_JAXLIB, SUPPORTED_JAXLIB, UnsupportedCompiler

SMALL_GRAPH = "bert-infer-l1-d64-h2-s32-b2-f32"


@pytest.fixture
def compilers_root(tmp_path, monkeypatch) -> Path:
    """An empty folder for added compilers."""
    root = tmp_path / "compilers"
    monkeypatch.setenv(COMPILERS_DIRECTORY_VARIABLE, str(root))
    # `--compiler NAME` sets it for the rest of the process: undone after each test, as the folder is.
    monkeypatch.setenv(COMPILER_VARIABLE, "")
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


# --- Compilers of the other kinds: a jaxlib wheel, an interpreter, a variant with XLA options ---------

# The smallest bf16 graph whose D the flip moves (float-normalization-bf16: 52 -> 54 ops).
BF16_GRAPH = "tensorflow-cnn-infer-l1-d32-b8-bf16"
FLIP = "--xla_allow_excess_precision=false"


def _fake_wheel(path: Path, name: str, version: str) -> Path:
    """A wheel file holding only its METADATA: enough for what `add --wheel` reads before installing."""
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}-{version}.dist-info/METADATA", f"Name: {name}\nVersion: {version}\n")
    return path


def _listed(capsys) -> dict[str, dict]:
    capsys.readouterr()
    assert main(["compilers", "list", "--json"]) == 0
    return {row["name"]: row for row in json.loads(capsys.readouterr().out)["compilers"]}


@pytest.mark.parametrize(
    ("make_argv", "message"),
    [
        (lambda tmp: ["--wheel", str(tmp / "missing.whl"), "--name", "b"], "missing.whl: no such file"),
        (lambda tmp: ["--wheel", str(tmp / "notes.txt"), "--name", "b"], "notes.txt: not a wheel (a .whl"),
        (lambda tmp: ["--wheel", str(tmp / "text.whl"), "--name", "b"], "text.whl: not a wheel (not a zip"),
        (
            lambda tmp: [
                "--wheel",
                str(_fake_wheel(tmp / "numpy-2.0-py3-none-any.whl", "numpy", "2.0")),
                "--name",
                "b",
            ],
            "a wheel of numpy, not of jaxlib",
        ),  # fmt: skip
        (
            lambda tmp: [
                "--wheel",
                str(_fake_wheel(tmp / "jaxlib-0.11.0.dev1-cp311.whl", "jaxlib", "0.11.0.dev1")),
                "--name",
                "b",
            ],
            "jaxlib 0.11.0.dev1 is a development build: name its jax (--jax VERSION",
        ),  # fmt: skip
        (lambda tmp: ["--python", str(tmp / "nowhere" / "python"), "--name", "b"], "no such interpreter"),
        (lambda tmp: ["--base", "0.10.2", "--xla-flags=-O3", "--name", "b"], "'-O3' is not an XLA option"),
        (lambda tmp: ["--base", "0.10.2", "--name", "b"], "--base and --xla-flags go together"),
        (
            lambda tmp: ["--base", "0.10.2", "--xla-flags=--xla_disable_hlo_passes=algsimp", "--name", "b"],
            "--xla_disable_hlo_passes: xlabench disables passes itself on every pass run; to gate",
        ),
        (
            lambda tmp: ["--base", "0.10.2", "--xla-flags=--xla_dump_to=/tmp/d", "--name", "b"],
            "--xla_dump_to: xlabench dumps on its own compiles",
        ),
        (lambda tmp: ["--base", "0.10.2", "--xla-flags", FLIP], "name it (--name NAME)"),
        (
            lambda tmp: ["--base", "0.10.2", "--xla-flags", FLIP, "--name", "0.10.1"],
            "0.10.1: a release number",
        ),
        (lambda tmp: ["--base", "0.10.2", "--xla-flags", FLIP, "--name", "a/b"], "not a compiler name"),
        (
            lambda tmp: ["--base", "no-such", "--xla-flags", FLIP, "--name", "b"],
            "compiler no-such is not added",
        ),
        (
            lambda tmp: ["0.10.1", "--wheel", "x.whl"],
            "give one of VERSION, --wheel PATH, --python PATH or --base",
        ),
        (
            lambda tmp: ["--python", sys.executable, "--jax", "0.10.2", "--name", "b"],
            "--jax and --jax-wheel go",
        ),
    ],
)
def test_bad_input_to_add_is_one_line_and_leaves_nothing(
    compilers_root, tmp_path, capsys, make_argv, message
):
    (tmp_path / "notes.txt").write_text("not a wheel")
    (tmp_path / "text.whl").write_text("not a zip either")
    assert main(["compilers", "add", *make_argv(tmp_path)]) == 2
    assert message in _one_error_line(capsys)
    assert not compilers_root.exists() or not any(compilers_root.iterdir())


@pytest.mark.slow
def test_an_option_xla_rejects_is_one_line_naming_it(compilers_root, capsys):
    argv = ["compilers", "add", "--base", "0.10.2", "--xla-flags", "--xla_no_such_option=1", "--name", "v"]
    assert main(argv) == 2
    assert _one_error_line(capsys) == (
        "xlabench: error: compiler v: XLA rejects its options: "
        "Unknown flag in XLA_FLAGS: --xla_no_such_option=1"
    )
    # A known option with a value it cannot take: XLA's own line, not its usage text.
    argv = ["compilers", "add", "--base", "0.10.2", "--xla-flags", "--xla_cpu_opt_preset=NOPE", "--name", "v"]
    assert main(argv) == 2
    assert _one_error_line(capsys) == (
        "xlabench: error: compiler v: XLA rejects its options: it cannot parse --xla_cpu_opt_preset=NOPE"
    )
    assert list(compilers_root.iterdir()) == []


def test_an_interpreter_without_jaxlib_is_one_line(compilers_root, tmp_path, capsys):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    python = tmp_path / "bare" / "bin" / "python"
    assert main(["compilers", "add", "--python", str(python), "--name", "bare"]) == 2
    assert _one_error_line(capsys) == (
        f"xlabench: error: {python}: has no jaxlib installed (its own jax and jaxlib are used)"
    )
    assert not compilers_root.exists() or list(compilers_root.iterdir()) == []


@pytest.mark.slow
def test_a_build_without_a_supported_api_is_refused_naming_what_is_missing(compilers_root, tmp_path, capsys):
    # A development jaxlib (any version is let in) whose internals jax cannot import: refused at add.
    venv = tmp_path / "dev"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True
    )
    (site,) = venv.glob("lib/python*/site-packages")
    (site / "jaxlib").mkdir()
    (site / "jaxlib" / "__init__.py").write_text('__version__ = "0.11.0.dev20261205"\n')
    info = site / "jaxlib-0.11.0.dev20261205.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: jaxlib\nVersion: 0.11.0.dev20261205\n")
    assert main(["compilers", "add", "--python", str(venv / "bin" / "python"), "--name", "dev"]) == 2
    line = _one_error_line(capsys)
    assert line.startswith("xlabench: error: dev (jaxlib 0.11.0.dev20261205, python): refused: ")
    assert "jaxlib" in line.split("refused: ", 1)[1]  # what it could not find
    assert list(compilers_root.iterdir()) == []


@pytest.mark.slow
def test_an_interpreter_is_used_as_it_is_and_a_name_is_taken_once(compilers_root, capsys):
    assert main(["compilers", "add", "--python", sys.executable, "--name", "dev-build"]) == 0
    listed = _listed(capsys)
    assert listed["dev-build"]["kind"] == "python" and listed["dev-build"]["python"] == sys.executable
    assert listed["dev-build"]["jaxlib"] == REFERENCE_JAXLIB
    # The same native code and no options: the same build, so the caches are shared.
    assert listed["dev-build"]["build"] == listed[REFERENCE_JAXLIB]["build"]
    assert main(["passes", "--compiler", "dev-build", "--json"]) == 0
    assert "algsimp" in {entry["name"] for entry in json.loads(capsys.readouterr().out)["passes"]}
    # Its compiles run under that interpreter: XLA's default count on a graph is the installed one's.
    graph = resolve_graphs(SMALL_GRAPH)[0]
    counts = []
    for name in ("dev-build", REFERENCE_JAXLIB):
        pool = CompilerPool(compiler=resolve_compiler(name))
        try:
            driver = PassDriver(pool=pool, use_cache=False)
            module = driver.load(graph.hlo_text(), graph.name)
            counts.append(driver.features(driver.run_default_pipeline(module)).op_count)
        finally:
            pool.close()
    assert counts == [216, 216]
    assert main(["compilers", "add", "--python", sys.executable, "--name", "dev-build"]) == 2
    assert "compiler dev-build already exists" in _one_error_line(capsys)
    assert main(["compilers", "remove", "dev-build"]) == 0
    assert list(compilers_root.iterdir()) == []


@pytest.mark.slow
def test_a_variant_passes_its_options_to_every_compile_and_the_diff_names_the_pass(
    compilers_root, tmp_path, capsys
):
    assert (
        main(["compilers", "add", "--base", REFERENCE_JAXLIB, f"--xla-flags={FLIP}", "--name", "strict"]) == 0
    )
    listed = _listed(capsys)
    assert listed["strict"]["kind"] == "variant" and listed["strict"]["xla_flags"] == [FLIP]
    assert listed["strict"]["base"] == REFERENCE_JAXLIB
    # Its own build: nothing cached for the installed compiler is taken for it.
    assert listed["strict"]["build"].startswith(listed[REFERENCE_JAXLIB]["build"] + "~")
    out = tmp_path / "diff.json"
    argv = ["compilers", "diff", REFERENCE_JAXLIB, "strict", "--graphs", BF16_GRAPH, "--no-runtime"]
    assert main([*argv, "--json", str(out)]) == 1  # more ops with the option: a regression
    document = json.loads(out.read_text())
    assert document["compilers"]["head"]["xla_flags"] == [FLIP]
    (graph,) = document["graphs"]
    assert graph["D"] == [52, 54]
    assert graph["changed_by"]["default"]["pass_name"] == "float-normalization-bf16"
    assert f"REGRESSION {BF16_GRAPH}: D 52 -> 54" in capsys.readouterr().out
    # A base with variants stays until they go.
    assert main(["compilers", "remove", REFERENCE_JAXLIB]) == 2
    assert main(["compilers", "remove", "strict"]) == 0


@pytest.mark.slow
def test_a_jaxlib_wheel_from_pips_cache_serves_as_its_release(
    second_compiler, compilers_root, tmp_path, capsys
):
    # The path a developer takes with their own build, on the previous release's wheel (pip's cache).
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--disable-pip-version-check",
         f"jaxlib=={SECOND_RELEASE}", "-d", str(tmp_path)],
        check=True,
    )  # fmt: skip
    (wheel,) = tmp_path.glob("jaxlib-*.whl")
    assert main(["compilers", "add", "--wheel", str(wheel), "--name", "my-build"]) == 0
    assert main(["passes", "--compiler", "my-build", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["action_sets"]["all"]) == 69
    listed = _listed(capsys)
    assert listed["my-build"]["kind"] == "wheel" and listed["my-build"]["jaxlib"] == SECOND_RELEASE
    # The same native code as the release's: the same build identity, the same counts.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(COMPILERS_DIRECTORY_VARIABLE, str(Path(second_compiler.python).parents[2]))
        release_build = _listed(capsys)[SECOND_RELEASE]["build"]
    assert listed["my-build"]["build"] == release_build
    graph = resolve_graphs(SMALL_GRAPH)[0]
    pool = CompilerPool(compiler=resolve_compiler("my-build"))
    try:
        driver = PassDriver(pool=pool, use_cache=False)
        assert driver.jaxlib_version == SECOND_RELEASE
        module = driver.load(graph.hlo_text(), graph.name)
        assert driver.features(driver.run_default_pipeline(module)).op_count == 232  # 0.10.1's D
    finally:
        pool.close()


def test_a_development_jaxlib_installed_beside_xlabench_is_named_with_the_way_to_use_it(monkeypatch):
    # xlabench installed into the Python where a developer's build lives: that build is no release.
    import xlabench.xla.compilers.named_compilers as compilers

    build = compilers.Compiler("0.11.0.dev1", "0.11.0.dev1", sys.executable)
    monkeypatch.setattr(compilers, "installed_compiler", lambda: build)
    monkeypatch.setenv(COMPILER_VARIABLE, "")
    with pytest.raises(UserInputError) as error:
        resolve_compiler()
    assert str(error.value) == (
        "the installed jaxlib 0.11.0.dev1 is a build, not a release: register it "
        f"(`xlabench compilers add --python {sys.executable} --name NAME`), then --compiler NAME"
    )
