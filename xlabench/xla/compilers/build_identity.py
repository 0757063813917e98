"""Which compiler build a cached result belongs to: a jaxlib is its native code, not its version string.

Caches (transitions, executables, the pass catalogue) are kept between runs, so a key must change
whenever the answer could: a jaxlib rebuilt with a patched pass under the same version (the change
a user gates) and xlabench's compiler-worker code (what a worker does with XLA, how modules are
printed and fingerprinted) both give other answers. The identity is the release, a digest of jaxlib's
native libraries and a digest of the worker's code: "0.10.2+111c110993ed.5f0c1e2a". Digesting ~350 MB
of libraries takes about half a second, so digests are remembered per file list (name, size, mtime).
"""

from __future__ import annotations

import functools
import glob
import hashlib
import importlib.util
import json
import os
import subprocess
import sys

from xlabench.files import write_atomically
from xlabench.xla.caches.transition_cache import cache_unwritable
from xlabench.xla.shared.cache_directory import cache_directory

NATIVE_SUFFIXES = (".so", ".pyd", ".dylib")
_DIGESTS_FILE = "compiler-builds.json"


# Run by another interpreter to say where its jaxlib is and which version it is, without importing it.
_JAXLIB_QUERY = (
    "import importlib.util, json, sys\n"
    "from importlib import metadata\n"
    "spec = importlib.util.find_spec('jaxlib')\n"
    "where = list(spec.submodule_search_locations or []) if spec else []\n"
    "def version(name):\n"
    "    try:\n"
    "        return metadata.version(name)\n"
    "    except metadata.PackageNotFoundError:\n"
    "        return None\n"
    "print(json.dumps({'python': sys.version.split()[0], 'jaxlib': version('jaxlib'), 'jax': version('jax'),"
    " 'numpy': version('numpy'), 'jaxlib_directory': where[0] if where else None}))\n"
)


class InterpreterQueryFailed(Exception):
    """The interpreter did not run the query (not a Python, or one that fails at start)."""


@functools.cache
def interpreter_packages(python: str) -> dict[str, str | None]:
    """What an interpreter has: its Python version, jax, jaxlib and numpy versions, its jaxlib folder."""
    try:
        finished = subprocess.run(
            [python, "-c", _JAXLIB_QUERY],
            capture_output=True,
            text=True,
            timeout=60,
            env=_query_environment(),
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise InterpreterQueryFailed(str(error)) from None
    lines = (finished.stdout or "").strip().splitlines()
    if finished.returncode != 0 or not lines:
        last = (finished.stderr or finished.stdout).strip().splitlines()
        raise InterpreterQueryFailed(last[-1] if last else f"exit {finished.returncode}")
    try:
        answer = json.loads(lines[-1])
    except ValueError:
        raise InterpreterQueryFailed(f"an answer that is not JSON: {lines[-1][:80]}") from None
    return answer


def _query_environment() -> dict[str, str]:
    """The environment without this process's PYTHONPATH: the interpreter's own packages answer."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}


def jaxlib_directory(python: str) -> str | None:
    """The jaxlib package folder of an interpreter: this one's (found, not imported), a managed venv's,
    or where any other interpreter says it is."""
    # A venv's interpreter is a link to the base one: compared by path, not by what it resolves to.
    if python == sys.executable:
        spec = importlib.util.find_spec("jaxlib")
        locations = list(spec.submodule_search_locations or []) if spec is not None else []
        return locations[0] if locations else None
    environment = os.path.dirname(os.path.dirname(python))
    found = sorted(glob.glob(os.path.join(environment, "lib*", "python*", "site-packages", "jaxlib")))
    if found:
        return found[0]
    try:
        return interpreter_packages(python).get("jaxlib_directory")
    except InterpreterQueryFailed:
        return None


def _native_files(directory: str) -> list[tuple[str, int, int]]:
    """(path relative to `directory`, size, mtime in ns) of every native library under it, sorted."""
    files = []
    for root, _, names in os.walk(directory):
        for name in names:
            if name.endswith(NATIVE_SUFFIXES):
                path = os.path.join(root, name)
                status = os.stat(path)
                files.append((os.path.relpath(path, directory), status.st_size, status.st_mtime_ns))
    return sorted(files)


def native_digest(directory: str) -> str:
    """sha256 of the native libraries under a jaxlib folder (names and contents), remembered on disk."""
    files = _native_files(directory)
    memo_path = os.path.join(cache_directory(), _DIGESTS_FILE)
    try:
        with open(memo_path) as handle:
            memo = json.load(handle)
    except (OSError, ValueError):
        memo = {}
    entry = memo.get(directory) if isinstance(memo, dict) else None
    if isinstance(entry, dict) and entry.get("files") == [list(item) for item in files]:
        return str(entry["digest"])
    digest = hashlib.sha256()
    for relative, _, _ in files:
        digest.update(relative.encode() + b"\0")
        with open(os.path.join(directory, relative), "rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
    answer = digest.hexdigest()
    memo = memo if isinstance(memo, dict) else {}
    memo[directory] = {"files": [list(item) for item in files], "digest": answer}
    try:
        write_atomically(memo_path, json.dumps(memo, indent=1, sort_keys=True).encode())
    except OSError as error:  # the memo only saves the next run half a second
        cache_unwritable(memo_path, error)
    return answer


# The code that runs in a compiler worker and decides its cached records (transitions, payloads,
# executables): every module of `worker/` and `shared/`, relative to the package, except these, which
# decide none of them.
NOT_RESULT_CODE = (
    # Runs and times executables: its answers (outputs, seconds) are never cached, and the executables
    # it compiles are keyed by `worker/executable_cache.py` (text, XLA options, build, machine).
    "worker/executable_timing.py",
    # The supported-release table and the variables a worker is started with.
    "shared/releases.py",
    # The exception types a worker raises and its caller raises again.
    "shared/failures.py",
    # Where the cache is.
    "shared/cache_directory.py",
)
_WORKER_FOLDERS = ("worker", "shared")


def worker_modules() -> tuple[str, ...]:
    """The modules the worker code digest covers, relative to `xlabench/xla`, sorted."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = []
    for folder in _WORKER_FOLDERS:
        for root, _, names in os.walk(os.path.join(package, folder)):
            found += [
                os.path.relpath(os.path.join(root, name), package) for name in names if name.endswith(".py")
            ]
    return tuple(sorted(name for name in found if name not in NOT_RESULT_CODE))


@functools.cache
def worker_code_digest() -> str:
    """sha256 of the compiler worker's code (`worker_modules`): what produces every cached record."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    digest = hashlib.sha256()
    for name in worker_modules():
        digest.update(name.encode() + b"\0")
        with open(os.path.join(package, name), "rb") as handle:
            digest.update(handle.read())
    return digest.hexdigest()


def build_identity(version: str, python: str, xla_flags: tuple[str, ...] = ()) -> str:
    """The key caches use for a compiler: release, native-code digest and driver-code digest, and a
    digest of the XLA options its workers pass to every compile (when there are any)."""
    directory = jaxlib_directory(python)
    native = native_digest(directory) if directory is not None else "unknown"
    identity = f"{version}+{native[:12]}.{worker_code_digest()[:8]}"
    if xla_flags:
        identity += "~" + hashlib.sha256("\0".join(xla_flags).encode()).hexdigest()[:8]
    return identity
