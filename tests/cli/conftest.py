"""The command line is tested on the fixtures of the packages it drives."""

from tests.agents.conftest import small_graph  # noqa: F401
from tests.graphs.conftest import small_graphs, stored_graphs  # noqa: F401
from tests.policies.conftest import policies_root  # noqa: F401
from tests.xla.conftest import data_directory  # noqa: F401
