"""The public API: `from xlabench import ...` names what a program needs, light to import."""

from __future__ import annotations

import subprocess
import sys

import pytest

import xlabench

SMALL_GRAPH = "recurrent-gru-infer-l1-h128-s16-b8-f32"


def test_every_public_name_resolves_and_has_a_docstring():
    for name in xlabench.__all__:
        value = getattr(xlabench, name)
        assert value.__doc__, f"xlabench.{name} has no docstring"
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        xlabench.no_such_name  # noqa: B018


def test_import_xlabench_loads_no_heavy_dependency():
    script = (
        "import sys, xlabench\n"
        "heavy = ('torch', 'jax', 'jaxlib', 'stable_baselines3', 'gymnasium', 'xlabench.xla.driver')\n"
        "print(' '.join(name for name in heavy if name in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def test_the_documented_example_runs_a_pass_and_an_evaluation():
    from xlabench import apply_pass, default_driver, evaluate, load_policy, resolve_graphs

    [graph] = resolve_graphs(SMALL_GRAPH)
    module = default_driver().load(graph.hlo_text(), graph.name)
    after = apply_pass(module, "algsimp")
    assert after.fingerprint != module.fingerprint
    assert load_policy("general").environment == xlabench.EnvironmentConfig()
    evaluation = evaluate("general", SMALL_GRAPH, runtime=False, workers=1)
    [row] = evaluation.rows
    assert evaluation.label.startswith("general@v") and row.name == SMALL_GRAPH and row.vs_default
    assert evaluation.to_json()["graphs"][0]["name"] == SMALL_GRAPH
