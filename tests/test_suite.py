"""The xlabench suite itself: every graph (`-m "not exhaustive"`: the smallest of each kind) x every
shipped policy through the plugin's gates, the Hypothesis semantics check and the known miscompiles
(see the README's "The pytest plugin"; `--xlabench-graphs` narrows it)."""

from xlabench.plugin.suite import (  # noqa: F401
    test_known_miscompile,
    test_pass_sequences_preserve_outputs,
    test_policy_on_graph,
)
