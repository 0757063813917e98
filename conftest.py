"""Session-wide test settings: caches and crash reproducers go to a per-run temporary directory.

pytest-xdist workers share one directory per run (keyed by the run's id), so the transition cache
is exercised by several processes at once, as in a user's `pytest -n auto`.
"""

import os
import tempfile

_run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
_directory = os.path.join(tempfile.gettempdir(), f"xlabench-test-{_run_id}")
os.environ.setdefault("XLABENCH_CACHE_DIR", os.path.join(_directory, "cache"))
os.environ.setdefault("XLABENCH_CRASH_DIR", os.path.join(_directory, "crashes"))

# The plugin's own tests run pytest on generated test files.
pytest_plugins = ["pytester"]
