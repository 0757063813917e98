"""xlabench from another project: a wheel built from this checkout, installed in a fresh environment,
gates the project's own graphs with the shipped policy and baselines written under the project."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from xlabench.files import checkout_directory
from xlabench.graphs import resolve_graphs

# Two small suite graphs stand in for the project's own modules.
PROJECT_GRAPHS = ("gnn-infer-l1-d64-n64-e256-f32", "mlp_mixer-infer-l2-d64-p4-i16-b2-bf16")
TEST_MODULE = (
    "from xlabench.plugin.suite import test_known_miscompile, test_pass_sequences_preserve_outputs, "
    "test_policy_on_graph  # noqa: F401\n"
)
PYPROJECT = '[tool.pytest.ini_options]\nxlabench_baselines = "gates/baselines"\n'


def run(command: list[str], cwd: Path, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run a command of the other project; its output is shown when it fails."""
    done = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(python, environment variables) of a fresh virtual environment with the wheel installed.

    The dependencies (jax, torch, pytest, ...) come from this environment's site-packages, added by a
    path file: only xlabench itself is the wheel's.
    """
    root = tmp_path_factory.mktemp("installed")
    # Another project's environment has none of this checkout's settings (a PYTHONPATH naming this
    # checkout would have pip see xlabench installed already, and import it before the wheel's).
    mine = ("XLABENCH_POLICIES_DIR", "XLABENCH_BASELINES_DIR", "PYTEST_XDIST_WORKER", "PYTHONPATH")
    environment = {key: value for key, value in os.environ.items() if key not in mine}
    checkout = checkout_directory()
    assert checkout is not None
    wheels = root / "wheels"
    # With setuptools here, build with it (no download); without, pip fetches it into an isolated build.
    isolation = ["--no-build-isolation"] if importlib.util.find_spec("setuptools") is not None else []
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation,
         "--wheel-dir", str(wheels), str(checkout)],
        check=True, capture_output=True, timeout=600, env=environment,
    )  # fmt: skip
    environment_dir = root / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", str(environment_dir)], check=True, timeout=600, env=environment
    )
    python = environment_dir / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True, env=environment,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    [wheel] = wheels.glob("xlabench-*.whl")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True, timeout=600, env=environment,
    )  # fmt: skip
    environment["PATH"] = f"{environment_dir / 'bin'}{os.pathsep}{environment.get('PATH', '')}"
    return python, environment


@pytest.mark.slow
def test_another_project_gates_its_graphs_with_the_shipped_policy(installed, tmp_path):
    python, environment = installed
    project = tmp_path / "project"
    (project / "graphs").mkdir(parents=True)
    (project / "tests").mkdir()
    for graph in resolve_graphs(",".join(PROJECT_GRAPHS)):
        (project / "graphs" / f"{graph.name}.hlo").write_text(graph.hlo_text())
    (project / "tests" / "test_xla.py").write_text(TEST_MODULE)
    (project / "pyproject.toml").write_text(PYPROJECT)

    # The installed package, not this checkout: the policy is the copy the wheel carries.
    where = run([str(python), "-c", "import xlabench.policies.artifact as a; print(a.policies_directory())"],
                project, environment).stdout.strip()  # fmt: skip
    assert "site-packages" in where and (Path(where) / "general").is_dir()

    # Baselines go under the project (XLABENCH_BASELINES_DIR here, the ini key for pytest below).
    run(["xlabench", "baselines", "update", "--policy", "general", "--graphs", "graphs", "--workers", "1"],
        project, {**environment, "XLABENCH_BASELINES_DIR": "gates/baselines"})  # fmt: skip
    stored = sorted(path.stem for path in (project / "gates" / "baselines" / "general").glob("*.json"))
    assert stored == sorted([*PROJECT_GRAPHS, "metadata"])

    gate = ["-n", "2", "-p", "no:cacheprovider", "--xlabench-graphs=graphs", "--xlabench-policy=general"]
    gated = run([str(python), "-m", "pytest", *gate], project, environment)
    assert "2 graph x policy, 0 failed" in gated.stdout
    assert "(no baseline)" not in gated.stdout

    # The environment, with no xlabench import: gymnasium's module:id form imports the registering module.
    made = run([str(python), "-c",
                "import gymnasium; env = gymnasium.make('xlabench.env:xlabench/PassOrdering-v0', "
                f"graphs='{PROJECT_GRAPHS[0]}'); print(env.reset(seed=0)[1]['op_count'])"],
               project, environment)  # fmt: skip
    assert int(made.stdout.split()[-1]) > 0
