"""The pass-ordering environment, registered with gymnasium as `xlabench/PassOrdering-v0`.

import gymnasium, xlabench.env
env = gymnasium.make("xlabench/PassOrdering-v0", graphs="train")

Its defaults are the shipped policy's environment (`EnvironmentConfig`); another policy's is
`PassOrderingEnv(**load_policy(name).environment.to_json())`.
"""

import gymnasium

from xlabench.env.pass_ordering import ENV_ID, PassOrderingEnv
from xlabench.env.starts import GraphStart

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="xlabench.env.pass_ordering:PassOrderingEnv")

__all__ = ["ENV_ID", "GraphStart", "PassOrderingEnv"]
