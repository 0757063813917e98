"""Settings: read from the environment in one place, laid over by entry points, never written back."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest

import xlabench
from xlabench.cli import main
from xlabench.errors import UserInputError
from xlabench.settings import (
    VARIABLES,
    Settings,
    WorkerStart,
    carried_over,
    current,
    from_environment,
    in_effect,
    runs_under_its_settings,
    worker_start,
)
from xlabench.xla.compilers.named_compilers import installed_compiler, resolve_compiler

PACKAGE = Path(xlabench.__file__).parent
# These copy the whole environment into a child process's, reading no setting of their own.
WHOLE_ENVIRONMENT_COPIES = (
    "xla/compilers/worker_handle.py",
    "xla/compilers/build_identity.py",
    "graphs/build.py",
)


def test_defaults_follow_the_cache_directory():
    settings = from_environment({"XDG_CACHE_HOME": "/somewhere"})
    assert settings.cache_directory == "/somewhere/xlabench"
    assert settings.compilers_directory == "/somewhere/xlabench/compilers"
    assert settings.crash_directory == "/somewhere/xlabench/crashes"
    assert (settings.compiler, settings.disabled_passes, settings.workers) == (None, (), 1)
    assert settings.use_cache and settings.executable_cache and settings.timing_slot is None
    assert settings.policies_directory is None and settings.baselines_directory is None


def test_every_variable_is_read():
    environment = {
        "XLABENCH_CACHE_DIR": "/c",
        "XLABENCH_NO_CACHE": "1",
        "XLABENCH_CACHE_MAX_MB": "10",
        "XLABENCH_EXECUTABLE_CACHE": "0",
        "XLABENCH_EXECUTABLE_CACHE_MAX_MB": "20",
        "XLABENCH_CRASH_DIR": "/crashes",
        "XLABENCH_COMPILERS_DIR": "/compilers",
        "XLABENCH_COMPILER": "0.10.1",
        "XLABENCH_DISABLE_PASSES": " algsimp,cse,,algsimp ",
        "XLABENCH_WORKERS": "3",
        "XLABENCH_COMPILER_TIMEOUT": "12.5",
        "XLABENCH_TIMING_SLOT": "1",
        "XLABENCH_POLICIES_DIR": "/p",
        "XLABENCH_BASELINES_DIR": "/b",
        "XLABENCH_TENSORFLOW_PYTHON": "/tf/bin/python",
    }
    assert set(environment) == set(VARIABLES)  # every documented variable, and only those
    assert from_environment(environment) == Settings(
        cache_directory="/c",
        compilers_directory="/compilers",
        crash_directory="/crashes",
        use_cache=False,
        cache_max_megabytes=10.0,
        executable_cache=False,
        executable_cache_max_megabytes=20.0,
        compiler="0.10.1",
        disabled_passes=("algsimp", "cse"),
        workers=3,
        compiler_timeout_seconds=12.5,
        timing_slot=1,
        policies_directory=Path("/p"),
        baselines_directory=Path("/b"),
        tensorflow_python="/tf/bin/python",
    )
    assert from_environment(environment).worker_environment() == {
        "XLABENCH_CACHE_DIR": "/c",
        "XLABENCH_EXECUTABLE_CACHE": "0",
        "XLABENCH_EXECUTABLE_CACHE_MAX_MB": "20.0",
        "XLABENCH_TIMING_SLOT": "1",
    }


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("XLABENCH_WORKERS", "two", "a whole number above 0"),
        ("XLABENCH_WORKERS", "0", "a whole number above 0"),
        ("XLABENCH_COMPILER_TIMEOUT", "-1", "a number above 0"),
        ("XLABENCH_CACHE_MAX_MB", "lots", "a number above 0"),
        ("XLABENCH_NO_CACHE", "yes", "0 or 1"),
        ("XLABENCH_TIMING_SLOT", "first", "a whole number from 0"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_variable(variable, value, expected):
    # (The timing slot defaults to the pytest-xdist worker's number: gw1 times on core 1.)
    assert from_environment({"PYTEST_XDIST_WORKER": "gw1"}).timing_slot == 1
    with pytest.raises(UserInputError) as error:
        from_environment({variable: value})
    assert str(error.value) == f"{variable}={value!r}: expected {expected}"


def test_the_command_line_says_a_bad_value_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("XLABENCH_WORKERS", "many")
    assert main(["graphs", "list"]) == 2
    assert (
        capsys.readouterr().err
        == "xlabench: error: XLABENCH_WORKERS='many': expected a whole number above 0\n"
    )


def test_settings_in_effect_hold_for_the_block_in_every_thread_then_the_environment_again(monkeypatch):
    monkeypatch.setenv("XLABENCH_COMPILER", "")
    asked = from_environment().with_options(compiler="not-added", workers=None)
    assert asked.workers == from_environment().workers  # None leaves a setting as it is
    seen = []
    with in_effect(asked):
        thread = threading.Thread(target=lambda: seen.append(current()))
        thread.start()
        thread.join()
        assert seen == [asked]
        # A library function called without settings runs as the command asked.
        with pytest.raises(UserInputError, match="compiler not-added is not added"):
            resolve_compiler()
    assert current() == from_environment()
    assert resolve_compiler() == installed_compiler()


def test_a_compiler_named_on_the_command_line_reaches_the_command_and_no_environment_is_written(capsys):
    before = dict(os.environ)
    release = installed_compiler().name
    assert main(["passes", "--compiler", release, "--json"]) == 0
    assert '"jaxlib_version"' in capsys.readouterr().out
    assert dict(os.environ) == before
    assert main(["passes", "--compiler", "not-added"]) == 2
    assert capsys.readouterr().err == (
        "xlabench: error: compiler not-added is not added (see `xlabench compilers list`)\n"
    )
    assert dict(os.environ) == before


def _modules() -> list[tuple[str, ast.Module]]:
    return [
        (path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text()))
        for path in sorted(PACKAGE.rglob("*.py"))
    ]


def _environment_uses(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, kind) of each use of os.environ / os.getenv / os.putenv: 'write' or 'read'."""
    uses = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os":
            if node.attr in ("putenv", "unsetenv"):
                uses.append((node.lineno, "write"))
            elif node.attr in ("environ", "getenv"):
                uses.append((node.lineno, "read"))
        if isinstance(node, ast.Subscript | ast.Attribute) and isinstance(node.ctx, ast.Store | ast.Del):
            target = node.value
            if isinstance(target, ast.Attribute) and target.attr == "environ":
                uses.append((node.lineno, "write"))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("update", "setdefault", "pop", "clear", "__setitem__")
            and isinstance(node.func.value, ast.Attribute)
            and node.func.value.attr == "environ"
        ):
            uses.append((node.lineno, "write"))
    return uses


def test_the_library_never_writes_an_environment_variable():
    writes = [
        f"{name}:{line}"
        for name, tree in _modules()
        for line, kind in _environment_uses(tree)
        if kind == "write"
    ]
    assert writes == []


def test_the_environment_is_read_in_one_place_by_callers_and_workers_alike():
    readers = {
        name for name, tree in _modules() if _environment_uses(tree) and name not in WHOLE_ENVIRONMENT_COPIES
    }
    assert readers == {"settings.py"}


def test_the_scan_finds_a_write_and_a_read():
    tree = ast.parse("import os\nos.environ['A'] = '1'\nos.environ.update(B='2')\nx = os.getenv('C')\n")
    assert [kind for _, kind in sorted(_environment_uses(tree))] == ["read", "write", "read", "write", "read"]


def test_a_worker_reads_what_its_pool_told_it():
    told = worker_start(
        {"XLABENCH_COMPILER_BUILD": "0.10.2-abc", "XLABENCH_SCRATCH_DIR": "/s", "XLABENCH_ACCEPT_BUILD": "1"}
    )
    assert told == WorkerStart(compiler_build="0.10.2-abc", scratch_directory="/s", accept_build=True)
    assert worker_start({}) == WorkerStart(compiler_build=None, scratch_directory=None, accept_build=False)


def test_a_driver_made_with_settings_runs_under_them():
    from xlabench import PassDriver, default_driver, resolve_graphs

    settings = Settings.from_environment().with_options(
        disabled_passes=["algsimp"], compiler_timeout_seconds=77.0
    )
    driver = PassDriver(settings=settings)
    assert driver.disabled_passes == ("algsimp",) and driver.timeout == 77.0
    assert driver.pool.settings == settings and driver.pool.timeout == 77.0
    [graph] = resolve_graphs("recurrent-gru-infer-l1-h128-s16-b8-f32")
    module = driver.load(graph.hlo_text(), graph.name)
    assert driver.apply_pass(module, "algsimp") is module  # off in this (simulated) compiler
    assert default_driver().apply_pass(module, "algsimp").fingerprint != module.fingerprint
    # Default drivers are kept per settings: equal settings share one, others never do.
    assert default_driver(settings) is default_driver(
        Settings.from_environment().with_options(disabled_passes=["algsimp"], compiler_timeout_seconds=77.0)
    )
    assert default_driver(settings) is not default_driver()


def test_settings_that_differ_in_what_a_driver_does_never_share_one():
    base = from_environment({"XLABENCH_CACHE_DIR": "/c"})
    for change in (
        {"compilers_directory": "/elsewhere"},
        {"compiler": "0.10.1"},
        {"disabled_passes": ["cse"]},
        {"use_cache": False},
        {"workers": 2},
        {"timing_slot": 1},
        {"crash_directory": "/crashes"},
    ):
        assert base.with_options(**change).driver_key() != base.driver_key(), change
    assert base.with_options(policies_directory=Path("/p")).driver_key() == base.driver_key()


def test_another_process_takes_what_the_command_chose_and_its_own_caches_and_core(monkeypatch):
    chosen = from_environment({"XLABENCH_CACHE_DIR": "/callers", "XLABENCH_TIMING_SLOT": "0"}).with_options(
        compiler="0.10.1", disabled_passes=["cse"], compiler_timeout_seconds=9.0
    )
    # The other process (a Ray node, say) has its own cache directory and is xdist's second worker.
    monkeypatch.setenv("XLABENCH_CACHE_DIR", "/nodes")
    monkeypatch.delenv("XLABENCH_TIMING_SLOT", raising=False)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    there = carried_over(chosen.carried())
    assert (there.compiler, there.disabled_passes, there.compiler_timeout_seconds) == (
        "0.10.1",
        ("cse",),
        9.0,
    )
    assert (there.cache_directory, there.timing_slot) == ("/nodes", 1)


def test_an_entry_function_puts_the_settings_it_is_given_in_effect_while_it_runs():
    seen = []

    @runs_under_its_settings
    def entry(*, settings=None):
        seen.append((settings, current()))

    given = from_environment().with_options(workers=3)
    entry(settings=given)
    entry()
    assert seen == [(given, given), (from_environment(), from_environment())]
    assert current() == from_environment()


def test_the_reference_lists_every_variable_and_no_other():
    reference = (Path(xlabench.__file__).parents[1] / "docs" / "reference.md").read_text()
    table = reference[reference.index("## Environment variables") :]
    listed = {
        line.split("`")[1].split("=")[0] for line in table.splitlines() if line.startswith("| `XLABENCH_")
    }
    assert listed == set(VARIABLES)
