"""Every stored graph parses with XLA, has the recorded op count and the outputs its program promises
(JAX's, or the TensorFlow model's); the smallest of each family runs on CPU and gives them."""

from __future__ import annotations

import re

import jax
import pytest

from tests.graphs.conftest import smallest_graphs
from xlabench.graphs import graph_sets, resolve_graphs
from xlabench.graphs.suite_definition import suite
from xlabench.models import tensorflow_models
from xlabench.xla.driver.execution import execute, random_inputs
from xlabench.xla.driver.hlo_module import HloModule

STORED_NAMES = [entry["name"] for entry in graph_sets.read_manifest(graph_sets.DATA_DIR)["graphs"]]
SPECS = {spec.name: spec for spec in suite()}


# XLA's HLO element types as numpy spells them (the dtype names JAX's abstract outputs carry).
NUMPY_NAMES = {"pred": "bool", "bf16": "bfloat16", **{f"{k}{b}": f"{n}{b}" for k, n in
               (("s", "int"), ("u", "uint"), ("f", "float")) for b in (8, 16, 32, 64)}}  # fmt: skip
ARRAY_SHAPE = re.compile(r"([a-z]+[0-9]*)\[([0-9,]*)\]")


def result_specs(hlo_text: str) -> list[tuple[tuple[int, ...], str]]:
    """Shape and numpy dtype of every output buffer, from the module's entry_computation_layout."""
    header = hlo_text.split("\n", 1)[0]
    layout = header.split("entry_computation_layout={", 1)[1]
    results = layout.rsplit(")->", 1)[1]
    return [
        (tuple(int(d) for d in dims.split(",") if d), NUMPY_NAMES[element_type])
        for element_type, dims in ARRAY_SHAPE.findall(results)
    ]


# The smoke tier checks the smallest graph of each family; the full run checks every stored graph.
SMALLEST = {graph.name for graph in smallest_graphs()}
EVERY_GRAPH = [
    name if name in SMALLEST else pytest.param(name, marks=pytest.mark.slow) for name in STORED_NAMES
]


@pytest.mark.parametrize("name", EVERY_GRAPH)
def test_graph_parses_with_its_op_count_and_the_outputs_its_program_promises(name: str) -> None:
    [graph] = resolve_graphs(name)
    module = HloModule.from_text(graph.hlo_text(), source=name)
    assert module.op_count == graph.instruction_count

    spec = SPECS[name]
    if spec.framework == "tensorflow":
        # TensorFlow's bridge orders a training step's updated variables its own way: compared as a set.
        expected = [(shape, "float32") for shape in tensorflow_models.output_shapes(spec.config)]
        assert sorted(result_specs(module.text)) == sorted(expected)
        return
    program = spec.program()
    expected = jax.tree.leaves(jax.eval_shape(program.fn, *program.args))
    assert result_specs(module.text) == [(tuple(leaf.shape), leaf.dtype.name) for leaf in expected]


# Compiling and running every graph is the suite's job (`tests/test_suite.py`: each policy's gate (d)
# runs XLA's default executable of every graph); here one graph of each family runs on its own.
@pytest.mark.parametrize("name", [graph.name for graph in smallest_graphs()])
def test_graph_executes_on_cpu_with_the_outputs_its_program_promises(name: str) -> None:
    [graph] = resolve_graphs(name)
    module = HloModule.from_text(graph.hlo_text(), source=name)
    outputs = execute(module, random_inputs(module, seed=0)).outputs
    assert [(tuple(out.shape), out.dtype.name) for out in outputs] == result_specs(module.text)
