"""Every stored graph parses with XLA, has the recorded op count, and runs on CPU with the outputs its
JAX program promises. One test per graph so pytest-xdist spreads the compiles over the cores."""

from __future__ import annotations

import jax
import pytest

from xlabench.graphs import resolve_graphs, storage
from xlabench.graphs.suite import suite
from xlabench.xla.execute import run_on_random_inputs
from xlabench.xla.module import HloModule

STORED_NAMES = [entry["name"] for entry in storage.read_manifest(storage.DATA_DIR)["graphs"]]
SPECS = {spec.name: spec for spec in suite()}


@pytest.mark.slow
@pytest.mark.parametrize("name", STORED_NAMES)
def test_graph_parses_and_executes_on_cpu(name: str) -> None:
    [graph] = resolve_graphs(name)
    module = HloModule.from_text(graph.hlo_text(), source=name)
    assert module.op_count == graph.instruction_count

    outputs = run_on_random_inputs(module, seed=0)

    program = SPECS[name].program()
    expected = jax.tree.leaves(jax.eval_shape(program.fn, *program.args))
    assert [(tuple(out.shape), out.dtype.name) for out in outputs] == [
        (tuple(leaf.shape), leaf.dtype.name) for leaf in expected
    ]
