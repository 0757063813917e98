"""Compilers side by side: the installed jaxlib, and managed environments with other releases.

The calling process never imports jax: every compile runs in a worker (`xlabench.xla.pool`), and a
worker can run under any interpreter that has jax, jaxlib and numpy. `xlabench compilers add 0.10.1`
makes such an interpreter -- a venv with `jax==0.10.1 jaxlib==0.10.1` and the numpy of this
process, nothing else (no torch) -- under `$XLABENCH_CACHE_DIR/compilers/0.10.1/`. A compiler is
named by its jaxlib release everywhere (`--compiler 0.10.1`, `XLABENCH_COMPILER=0.10.1`); caches
key on that release, so releases never share a transition.

An environment is built in a temporary folder and renamed into place only once its worker has
answered, so an interrupted or failed `add` leaves nothing behind.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata

from xlabench.errors import UserInputError
from xlabench.files import write_json
from xlabench.xla.build import build_identity
from xlabench.xla.cache import cache_directory
from xlabench.xla.releases import check_supported, parse_version
from xlabench.xla.worker_process import Worker, WorkerDied, WorkerTimedOut

COMPILER_VARIABLE = "XLABENCH_COMPILER"
_RECORD = "compiler.json"  # written last: a folder without it is not a compiler


@dataclass(frozen=True)
class Compiler:
    """One XLA compiler: its jaxlib release and the interpreter its workers run under."""

    version: str
    python: str
    managed: bool  # made by `xlabench compilers add` (else: the jaxlib installed beside xlabench)

    @property
    def label(self) -> str:
        """How listings name it."""
        return f"jaxlib {self.version}" + ("" if self.managed else " (installed)")


_builds: dict[tuple[str, str], str] = {}


def compiler_build(compiler: Compiler) -> str:
    """The compiler's build identity (`xlabench.xla.build`): what every cache keys its results by."""
    key = (compiler.version, compiler.python)
    if key not in _builds:
        _builds[key] = build_identity(compiler.version, compiler.python)
    return _builds[key]


COMPILERS_DIRECTORY_VARIABLE = "XLABENCH_COMPILERS_DIR"


def compilers_directory() -> str:
    """Where managed compiler environments live: $XLABENCH_COMPILERS_DIR or the cache's compilers/."""
    return os.environ.get(COMPILERS_DIRECTORY_VARIABLE) or os.path.join(cache_directory(), "compilers")


def installed_compiler() -> Compiler | None:
    """The jaxlib installed in this environment (read from package metadata, not imported), if any."""
    try:
        version = metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return None
    return Compiler(version, sys.executable, managed=False)


def _environment_python(directory: str) -> str:
    return os.path.join(directory, "Scripts" if os.name == "nt" else "bin", "python")


def managed_compilers() -> list[Compiler]:
    """Every environment `xlabench compilers add` made, oldest release first."""
    found: list[Compiler] = []
    root = compilers_directory()
    if not os.path.isdir(root):
        return found
    for name in os.listdir(root):
        directory = os.path.join(root, name)
        if name.startswith(".") or not os.path.isfile(os.path.join(directory, _RECORD)):
            continue
        found.append(Compiler(name, _environment_python(directory), managed=True))
    return sorted(found, key=lambda compiler: parse_version(compiler.version))


def resolve_compiler(version: str | None = None) -> Compiler:
    """The compiler named by `version`, or by $XLABENCH_COMPILER, or else the installed one.

    Raises UserInputError (one line) for a release outside the supported range, one not added,
    or a managed environment that is broken.
    """
    version = version or os.environ.get(COMPILER_VARIABLE) or None
    installed = installed_compiler()
    if version is None or (installed is not None and version == installed.version):
        if installed is None:
            raise UserInputError(
                "no jaxlib is installed here: install xlabench with its default jaxlib, or name an added "
                f"compiler (--compiler VERSION, {COMPILER_VARIABLE})"
            )
        check_supported(installed.version)
        return installed
    check_supported(version)
    directory = os.path.join(compilers_directory(), version)
    if not os.path.isdir(directory):
        raise UserInputError(f"jaxlib {version} is not added: run `xlabench compilers add {version}`")
    python = _environment_python(directory)
    if not os.path.isfile(os.path.join(directory, _RECORD)) or not os.access(python, os.X_OK):
        raise UserInputError(
            f"jaxlib {version}: the environment {directory} is broken (no {_RECORD} or no interpreter); "
            f"`xlabench compilers remove {version}`, then add it again"
        )
    return Compiler(version, python, managed=True)


def add_compiler(version: str, progress: Callable[[str], None] = print) -> Compiler:
    """Make the managed environment of jaxlib `version` (pip, showing its progress); return the compiler.

    Already added: returned as it is. A release outside the range, or one the registry does not
    have: UserInputError, and nothing is left behind.
    """
    from filelock import FileLock  # the caller's side only: compiler workers never add

    check_supported(version)
    installed = installed_compiler()
    if installed is not None and installed.version == version:
        progress(f"jaxlib {version} is the installed compiler: nothing to add")
        return installed
    os.makedirs(compilers_directory(), exist_ok=True)
    # Two adds of one release at once: the second waits, then finds it added. The lock file stands
    # beside the folder, so the folder holds environments only.
    with FileLock(f"{compilers_directory().rstrip(os.sep)}-{version}.lock"):
        return _add_unlocked(version, progress)


def _add_unlocked(version: str, progress: Callable[[str], None]) -> Compiler:
    target = os.path.join(compilers_directory(), version)
    if os.path.isfile(os.path.join(target, _RECORD)):
        progress(f"jaxlib {version} is already added ({target})")
        return Compiler(version, _environment_python(target), managed=True)
    if os.path.exists(target):
        raise UserInputError(
            f"jaxlib {version}: {target} exists but is not a finished environment; "
            f"`xlabench compilers remove {version}`, then add it again"
        )
    building = tempfile.mkdtemp(prefix=f".{version}-", dir=compilers_directory())
    started = time.monotonic()
    try:
        progress(f"[1/3] creating an environment for jaxlib {version}")
        _run([sys.executable, "-m", "venv", "--clear", building], f"jaxlib {version}: venv failed")
        packages = [f"jax=={version}", f"jaxlib=={version}", f"numpy=={metadata.version('numpy')}"]
        progress(f"[2/3] pip install {' '.join(packages)}")
        _pip_install(_environment_python(building), packages, version, progress)
        progress("[3/3] starting a compiler worker in it")
        answered = _probe(_environment_python(building))
        if answered != version:
            raise UserInputError(f"jaxlib {version}: the new environment's worker reports jaxlib {answered}")
        record = {
            "jaxlib": version,
            "packages": packages,
            "python": sys.version.split()[0],
            "made": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        write_json(os.path.join(building, _RECORD), record)
        _relocate(building, target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    progress(f"added jaxlib {version} in {time.monotonic() - started:.0f} s: {target}")
    return Compiler(version, _environment_python(target), managed=True)


def remove_compiler(version: str) -> str:
    """Delete the managed environment of `version` (finished or broken); return its folder."""
    parse_version(version)
    target = os.path.join(compilers_directory(), version)
    if not os.path.isdir(target):
        raise UserInputError(f"jaxlib {version} is not added (see `xlabench compilers list`)")
    # Rename first: a removal cut short never leaves a folder that looks like a compiler.
    doomed = tempfile.mkdtemp(prefix=f".{version}-removing-", dir=compilers_directory())
    os.replace(target, os.path.join(doomed, version))
    shutil.rmtree(doomed, ignore_errors=True)
    return target


def _run(command: list[str], failure: str) -> None:
    finished = subprocess.run(command, capture_output=True, text=True)
    if finished.returncode != 0:
        last = (finished.stderr or finished.stdout).strip().splitlines()
        raise UserInputError(f"{failure}: {last[-1] if last else f'exit {finished.returncode}'}")


def _pip_install(python: str, packages: list[str], version: str, progress: Callable[[str], None]) -> None:
    """pip install into the environment, its progress lines shown; a failure becomes one line."""
    command = [
        python,
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
        *packages,
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    errors: list[str] = []
    try:
        for line in process.stdout:
            line = line.strip()
            if line.startswith("ERROR:"):
                errors.append(line.removeprefix("ERROR:").strip())
            elif line.startswith(("Collecting", "Downloading", "Installing", "Successfully", "Using cached")):
                progress(f"      {line.strip()}")
        process.wait()
    except BaseException:
        process.kill()
        process.wait()
        raise
    if process.returncode != 0:
        if any(re.search(r"(No matching distribution|Could not find a version)", e) for e in errors):
            raise UserInputError(f"jaxlib {version}: the package registry has no jax/jaxlib {version}")
        raise UserInputError(
            f"jaxlib {version}: pip failed: {errors[-1] if errors else f'exit {process.returncode}'}"
        )


def _probe(python: str) -> str:
    """Start one worker under `python`; the jaxlib version it answers with."""

    worker = Worker(python=python)
    try:
        return str(worker.call("jaxlib_version", {}, timeout=300))
    except (WorkerDied, WorkerTimedOut) as failure:
        last = failure.stderr_tail.strip().splitlines()
        raise UserInputError(
            f"the new environment's compiler worker does not start: {failure}"
            + (f": {last[-1]}" if last else "")
        ) from None
    finally:
        worker.close()


def _relocate(source: str, target: str) -> None:
    """Move a finished environment into place.

    Its interpreter finds its packages from where it stands (pyvenv.cfg beside bin/), so a moved venv
    works; only pip's own launcher scripts keep the old path, and xlabench runs `python -m pip`.
    """
    os.replace(source, target)
