"""The xlabench suite itself: every graph x every shipped policy through the plugin's gates, and the
Hypothesis semantics check (see the README's "The pytest plugin"; `--xlabench-graphs` narrows it)."""

from xlabench.plugin.suite import test_pass_sequences_preserve_outputs, test_policy_on_graph  # noqa: F401
