"""Session-wide test settings.

The suite runs on the kept cache, as a user's `pytest -n auto` does: `$XLABENCH_CACHE_DIR` (default
`~/.cache/xlabench`) holds the transitions, the executables, the Hypothesis database and crash
reproducers between runs, so the second run of an unchanged compiler is warm. Every cached result is
keyed by the compiler build (`xlabench.xla.compilers.build_identity`): a rebuilt jaxlib or changed worker code
starts cold by itself. A test that needs an empty cache makes its own (`tmp_path`), and it goes with the test.

pytest-xdist workers share the cache, so the transition cache is exercised by several processes at once.
"""

import os
import shutil
import tempfile

import pytest

# Added compilers (`xlabench compilers add`, hundreds of MB each) stay where the user's cache keeps them.
if "XLABENCH_COMPILERS_DIR" not in os.environ:
    from xlabench.xla.compilers.named_compilers import compilers_directory

    os.environ["XLABENCH_COMPILERS_DIR"] = compilers_directory()

# This run's scratch folder: made by the first process (the xdist controller, or a serial run), inherited
# by the workers, removed when the run ends.
_RUN_DIRECTORY_VARIABLE = "XLABENCH_TEST_RUN_DIR"
if _RUN_DIRECTORY_VARIABLE not in os.environ:
    os.environ[_RUN_DIRECTORY_VARIABLE] = tempfile.mkdtemp(prefix="xlabench-test-")
    _owns_run_directory = True
else:
    _owns_run_directory = False

# The plugin's own tests run pytest on generated test files.
pytest_plugins = ["pytester"]


# The release the compiler-change tests add beside the installed one (pip installs it from its cache
# after the first time): the previous release of the reference compiler.
SECOND_RELEASE = "0.10.1"


@pytest.fixture(scope="session")
def second_compiler():
    """jaxlib SECOND_RELEASE, added in this run's own folder: once per run, shared by the xdist workers."""
    from filelock import FileLock

    from xlabench.xla.compilers.named_compilers import COMPILERS_DIRECTORY_VARIABLE, add_compiler

    run_directory = os.environ[_RUN_DIRECTORY_VARIABLE]
    with FileLock(os.path.join(run_directory, "compilers.lock")), pytest.MonkeyPatch.context() as patch:
        patch.setenv(COMPILERS_DIRECTORY_VARIABLE, os.path.join(run_directory, "compilers"))
        return add_compiler(SECOND_RELEASE, progress=lambda line: None)


def pytest_unconfigure(config):
    """The run's scratch folder goes when the process that made it ends its run."""
    if _owns_run_directory:
        shutil.rmtree(os.environ[_RUN_DIRECTORY_VARIABLE], ignore_errors=True)
