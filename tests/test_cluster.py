"""`--ray ADDRESS`: evaluation tasks and training environments on a Ray instance the test starts."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from xlabench.cli import main
from xlabench.errors import UserInputError

# Ray clusters: seconds to start, left out of the smoke tier.
pytestmark = pytest.mark.slow

GRAPH = "recurrent-gru-infer-l1-h128-s16-b8-f32"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory):
    """A local Ray head node with 2 CPUs, started for these tests and stopped after them."""
    ray = pytest.importorskip("ray", reason='Ray is the [ray] extra: pip install -e ".[test]"')
    executable = shutil.which("ray", path=os.path.dirname(sys.executable))
    port = _free_port()
    temp = tmp_path_factory.mktemp("ray")
    command = [executable, "start", "--head", "--num-cpus", "2", "--port", str(port),
               "--include-dashboard", "false", "--temp-dir", str(temp), "--disable-usage-stats"]  # fmt: skip
    subprocess.run(command, check=True, capture_output=True, timeout=180)
    try:
        yield f"127.0.0.1:{port}"
    finally:
        if ray.is_initialized():
            ray.shutdown()
        subprocess.run([executable, "stop", "--force"], capture_output=True, timeout=120)


def test_eval_runs_graphs_as_ray_tasks(ray_address, tmp_path):
    out = tmp_path / "eval.json"
    code = main(["eval", "--policy", "replay", "--graphs", GRAPH, "--no-runtime", "--ray", ray_address,
                 "--json", str(out)])  # fmt: skip
    assert code == 0
    (row,) = json.loads(out.read_text())["graphs"]
    assert row["R"] == row["D"]  # the same replay as in-process: XLA's own count


def test_training_environments_run_as_ray_actors(ray_address):
    from xlabench.agents.train import train

    run = train(
        algorithm="ppo",
        graphs=GRAPH,
        steps=128,
        seed=0,
        environments=2,
        progress=False,
        ray_address=ray_address,
    )
    assert run.steps >= 128 and run.episodes >= 1


def test_an_unreachable_cluster_is_one_clear_error(monkeypatch):
    pytest.importorskip("ray")
    import ray

    from xlabench.cluster import connect

    if ray.is_initialized():
        ray.shutdown()
    with pytest.raises(UserInputError, match="cannot connect to a Ray cluster"):
        connect(f"127.0.0.1:{_free_port()}")
