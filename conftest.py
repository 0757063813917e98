"""Session-wide test settings: caches and crash reproducers go to a per-run temporary directory
(added compilers stay in the user's cache).

pytest-xdist workers share one directory per run (keyed by the run's id), so the transition cache
is exercised by several processes at once, as in a user's `pytest -n auto`.
"""

import os
import tempfile

import pytest

# Added compilers (`xlabench compilers add`, hundreds of MB each) stay where the user's cache keeps them.
if "XLABENCH_COMPILERS_DIR" not in os.environ:
    from xlabench.xla.compilers import compilers_directory

    os.environ["XLABENCH_COMPILERS_DIR"] = compilers_directory()

_run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
_directory = os.path.join(tempfile.gettempdir(), f"xlabench-test-{_run_id}")
os.environ.setdefault("XLABENCH_CACHE_DIR", os.path.join(_directory, "cache"))
os.environ.setdefault("XLABENCH_CRASH_DIR", os.path.join(_directory, "crashes"))

# The plugin's own tests run pytest on generated test files.
pytest_plugins = ["pytester"]


# The release the compiler-change tests add beside the installed one (pip installs it from its cache
# after the first time): the previous release of the reference compiler.
SECOND_RELEASE = "0.10.1"


@pytest.fixture(scope="session")
def second_compiler():
    """jaxlib SECOND_RELEASE, added in this run's own folder: once per run, shared by the xdist workers."""
    from filelock import FileLock

    from xlabench.xla.compilers import COMPILERS_DIRECTORY_VARIABLE, add_compiler

    directory = os.path.join(_directory, "compilers")
    os.makedirs(_directory, exist_ok=True)
    with FileLock(os.path.join(_directory, "compilers.lock")), pytest.MonkeyPatch.context() as patch:
        patch.setenv(COMPILERS_DIRECTORY_VARIABLE, directory)
        return add_compiler(SECOND_RELEASE, progress=lambda line: None)
