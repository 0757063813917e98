"""The import contract: xlabench's packages import one way down the data path, none imports upwards.

Every import counts, those inside functions included, so no cycle hides in a function body.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import xlabench

# Bottom to top. A package may import the packages below it, never one above: the data path
# xla -> graphs -> env -> search -> policies -> agents -> eval -> bench -> baselines -> retraining ->
# plugin, with the interactive protocol and the command line on top. `models` (the JAX programs the
# graphs are lowered from) sits under graphs; `errors`, `files`, `cluster` and `settings` are shared by all.
LAYERS = (
    ("errors", "files", "cluster", "settings"),
    ("xla", "models"),
    ("graphs",),
    ("env",),
    ("search",),
    ("policies",),
    ("agents",),
    ("eval",),
    ("bench",),
    ("baselines",),
    ("retraining",),
    ("plugin",),
    ("interactive",),
    ("cli",),
)
LEVEL = {package: level for level, packages in enumerate(LAYERS) for package in packages}
ROOT = Path(xlabench.__file__).parent


def _package(path: Path) -> str:
    parts = path.relative_to(ROOT).parts
    return parts[0] if len(parts) > 1 else path.stem


def _imported_packages(path: Path) -> list[tuple[str, int]]:
    """Each xlabench package `path` imports (at any depth of its code), with the line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] if node.module != "xlabench" else [f"xlabench.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found += [(name.split(".")[1], node.lineno) for name in names if name.startswith("xlabench.")]
    return found


def test_every_package_has_a_layer():
    packages = {_package(path) for path in ROOT.rglob("*.py")} - {"__init__", "shipped_policies"}
    assert packages <= set(LEVEL), f"give these packages a layer: {sorted(packages - set(LEVEL))}"


def test_no_package_imports_one_above_it():
    upward = [
        f"{path.relative_to(ROOT.parent)}:{line}: {_package(path)} imports {target}"
        for path in sorted(ROOT.rglob("*.py"))
        if _package(path) in LEVEL
        for target, line in _imported_packages(path)
        if target in LEVEL and LEVEL[target] > LEVEL[_package(path)]
    ]
    assert upward == []


def test_the_contract_catches_an_upward_import(tmp_path, monkeypatch):
    # The check itself: a module of xla that imports the graphs, inside a function, is found.
    fake = tmp_path / "xlabench"
    (fake / "xla").mkdir(parents=True)
    (fake / "xla" / "probe.py").write_text("def f():\n    from xlabench.graphs import resolve_graphs\n")
    monkeypatch.setattr(f"{__name__}.ROOT", fake)
    assert _imported_packages(fake / "xla" / "probe.py") == [("graphs", 2)]
    try:
        test_no_package_imports_one_above_it()
    except AssertionError as error:
        assert "xla/probe.py:2: xla imports graphs" in str(error)
    else:
        raise AssertionError("an upward import inside a function went unnoticed")


# The compiler boundary inside `xla`: the worker side imports nothing of the caller's side, and the
# caller's side never imports the worker's code (it starts `python -m xlabench.xla.worker`).
WORKER_SIDE = ("worker", "shared")
CALLER_SIDE = ("compilers", "caches", "driver", "diagnosis")
XLA_FOLDERS = {*WORKER_SIDE, *CALLER_SIDE}
# Outside `xla`, the one process that runs jaxlib itself: graph lowering (its own subprocess).
JAXLIB_USERS = {"graphs/build.py"}


def _xla_folder(module: str) -> str | None:
    """The folder of `xlabench.xla` a dotted module name is in (None for the package itself)."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["xlabench", "xla"] else None


def _xla_imports(path: Path) -> list[tuple[str, int]]:
    """Each folder of xlabench.xla that `path` imports (at any depth of its code), with the line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found += [(folder, node.lineno) for name in names if (folder := _xla_folder(name))]
    return sorted(set(found))


def test_every_module_of_xla_is_in_a_folder_of_one_side():
    loose = [path.name for path in (ROOT / "xla").glob("*.py") if path.name != "__init__.py"]
    folders = {path.name for path in (ROOT / "xla").iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert loose == [] and folders == XLA_FOLDERS


def test_the_worker_side_imports_nothing_of_the_callers_side():
    crossing = [
        f"{path.relative_to(ROOT)}:{line}: imports xla.{folder}"
        for side in WORKER_SIDE
        for path in sorted((ROOT / "xla" / side).rglob("*.py"))
        for folder, line in _xla_imports(path)
        if folder in CALLER_SIDE or (side == "shared" and folder == "worker")
    ]
    assert crossing == []


def test_only_the_worker_side_imports_the_workers_code():
    reaching = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(ROOT.rglob("*.py"))
        if path.relative_to(ROOT).parts[:2] not in (("xla", "worker"),)
        and path.relative_to(ROOT).as_posix() not in JAXLIB_USERS
        for folder, line in _xla_imports(path)
        if folder == "worker"
    ]
    assert reaching == []


def test_a_worker_process_loads_none_of_the_callers_side():
    """What `python -m xlabench.xla.worker` imports: the worker side and `shared`, not the driver."""
    script = (
        "import sys\n"
        "import xlabench.xla.worker.registry\n"
        "print(' '.join(sorted(name for name in sys.modules if name.startswith('xlabench.'))))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    loaded = result.stdout.split()
    assert "xlabench.xla.worker.pass_runs" in loaded
    assert [name for name in loaded if _xla_folder(name) in CALLER_SIDE] == []


def test_the_command_line_starts_without_the_heavy_dependencies():
    """`xlabench --help` stays fast: the CLI and its parser load no torch, jax, matplotlib or SB3."""
    script = (
        "import sys\n"
        "import xlabench.cli\n"
        "xlabench.cli.build_parser()\n"
        "heavy = ('torch', 'jax', 'jaxlib', 'matplotlib', 'stable_baselines3', 'sb3_contrib', 'ray')\n"
        "print(' '.join(name for name in heavy if name in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"the CLI imports {result.stdout.strip()} at startup"


def test_no_two_modules_share_a_name():
    """A module's name says what it is for: `compare.py` in three packages says nothing."""
    stems: dict[str, list[str]] = {}
    for path in ROOT.rglob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            stems.setdefault(path.stem, []).append(path.relative_to(ROOT).as_posix())
    assert {stem: paths for stem, paths in stems.items() if len(paths) > 1} == {}
