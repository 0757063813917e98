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
# xla -> graphs -> env -> search -> policies -> agents -> eval -> baselines -> plugin, with the
# interactive protocol and the command line on top. `models` (the JAX programs the graphs are lowered
# from) sits under graphs; `errors`, `files` and `cluster` are shared by all.
LAYERS = (
    ("errors", "files", "cluster"),
    ("xla", "models"),
    ("graphs",),
    ("env",),
    ("search",),
    ("policies",),
    ("agents",),
    ("eval",),
    ("baselines",),
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
