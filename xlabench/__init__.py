"""xlabench: benchmark and regression suite for RL-driven pass ordering in XLA.

The public API, by stage of the data path (docs/design.md, "A newcomer's map"):

    from xlabench import apply_pass, default_driver, evaluate, resolve_graphs

    graph = resolve_graphs("test:gpt2")[0]
    module = default_driver().load(graph.hlo_text(), graph.name)
    after = apply_pass(module, "algsimp")                 # one real XLA pass
    evaluation = evaluate("general", "test:gpt2")         # what `xlabench eval` runs

- the compiler boundary: `HloModule`, `PassDriver`, `default_driver`, `apply_pass`,
  `run_default_pipeline`, `Compiler`, `resolve_compiler`;
- graphs: `Graph`, `resolve_graphs`;
- the environment: `PassOrderingEnv`, `EnvironmentConfig` (its defaults are the shipped policy's);
- policies: `Policy`, `load_policy`, `rollout`;
- training: `train`;
- evaluation: `evaluate`, `Evaluation`;
- settings: `Settings` (what the environment decides: `Settings.from_environment()`; `xlabench.settings`).

Names are imported on first use, so `import xlabench` stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from xlabench.agents.train import train
    from xlabench.env.environment_config import EnvironmentConfig
    from xlabench.env.pass_ordering import PassOrderingEnv
    from xlabench.eval.evaluate import Evaluation, evaluate
    from xlabench.graphs.loader import Graph, resolve_graphs
    from xlabench.policies.policy import Policy, load_policy, rollout
    from xlabench.settings import Settings
    from xlabench.xla import (
        Compiler,
        HloModule,
        PassDriver,
        apply_pass,
        default_driver,
        resolve_compiler,
        run_default_pipeline,
    )

# Each public name, and the module that defines it.
_DEFINED_IN = {
    "Compiler": "xlabench.xla",
    "HloModule": "xlabench.xla",
    "PassDriver": "xlabench.xla",
    "apply_pass": "xlabench.xla",
    "default_driver": "xlabench.xla",
    "resolve_compiler": "xlabench.xla",
    "run_default_pipeline": "xlabench.xla",
    "Graph": "xlabench.graphs.loader",
    "resolve_graphs": "xlabench.graphs.loader",
    "EnvironmentConfig": "xlabench.env.environment_config",
    "PassOrderingEnv": "xlabench.env.pass_ordering",
    "Policy": "xlabench.policies.policy",
    "load_policy": "xlabench.policies.policy",
    "rollout": "xlabench.policies.policy",
    "train": "xlabench.agents.train",
    "Evaluation": "xlabench.eval.evaluate",
    "evaluate": "xlabench.eval.evaluate",
    "Settings": "xlabench.settings",
}

__all__ = [
    "Compiler",
    "EnvironmentConfig",
    "Evaluation",
    "Graph",
    "HloModule",
    "PassDriver",
    "PassOrderingEnv",
    "Policy",
    "Settings",
    "apply_pass",
    "default_driver",
    "evaluate",
    "load_policy",
    "resolve_compiler",
    "resolve_graphs",
    "rollout",
    "run_default_pipeline",
    "train",
]


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    if name not in _DEFINED_IN:
        raise AttributeError(f"module 'xlabench' has no attribute {name!r}")
    value = getattr(importlib.import_module(_DEFINED_IN[name]), name)
    globals()[name] = value
    return value
