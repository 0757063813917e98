"""Compilers by name, side by side: the installed jaxlib, and managed entries of four kinds.

The calling process never imports jax: every compile runs in a worker (`xlabench.xla.compilers.worker_pool`),
and a worker can run under any interpreter that has jax, jaxlib and numpy. `xlabench compilers add` keeps
each compiler under `$XLABENCH_CACHE_DIR/compilers/NAME/` with its record, `compiler.json`:

- a release (`add 0.10.1`; its name is the version): a venv with `jax==V jaxlib==V` and the numpy of
  this process, nothing else (no torch);
- a wheel (`add --wheel PATH --name NAME`): a venv with a local jaxlib wheel -- a developer's own
  build -- and a matching jax;
- an interpreter (`add --python PATH --name NAME`): its installed jaxlib used as it is, nothing
  installed into it;
- a variant (`add --base NAME --xla-flags "..." --name NAME2`): another compiler's interpreter with
  explicit XLA options, passed (as `XLA_FLAGS`) to every compile its workers make.

A wheel's or an interpreter's jaxlib may carry any version: it is served when the adapter finds the
API of a supported release in it. Caches key on the build (`compiler_build`: the native code's
digest and the options), so no two compilers share a cached result.

An entry is built in a temporary folder and renamed into place only once its worker has answered,
so an interrupted or failed `add` leaves nothing behind.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from email.parser import HeaderParser
from importlib import metadata
from typing import Any

from xlabench.errors import UserInputError
from xlabench.files import write_json
from xlabench.settings import ACCEPT_BUILD_VARIABLE, Settings, current
from xlabench.xla.compilers.build_identity import InterpreterQueryFailed, build_identity, interpreter_packages
from xlabench.xla.compilers.worker_handle import Worker, WorkerDied, WorkerTimedOut
from xlabench.xla.shared.releases import (
    UnsupportedCompiler,
    check_supported,
    compiler_title,
    is_release,
    parse_version,
)

COMPILER_VARIABLE = "XLABENCH_COMPILER"
_RECORD = "compiler.json"  # written last: a folder without it is not a compiler
KINDS = ("installed", "release", "wheel", "python", "variant")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
_XLA_OPTION = re.compile(r"--xla_[A-Za-z0-9_]+(=\S*)?")
# What XLA logs when it refuses an option: an unknown name, or a value it cannot read.
_REJECTED_OPTION = re.compile(
    r"Unknown flags? in XLA_FLAGS|Couldn't interpret value|[Ii]llegal value|[Ii]nvalid value"
)


@dataclass(frozen=True)
class Compiler:
    """One XLA compiler by name: its jaxlib, the interpreter its workers run under, its XLA options."""

    name: str
    version: str  # the jaxlib version its workers report
    python: str
    kind: str = "installed"
    xla_flags: tuple[str, ...] = ()  # passed to every compile its workers make
    base: str | None = None  # a variant's base compiler
    build: bool = False  # registered as a build: any version, served when its API fits

    @property
    def managed(self) -> bool:
        """Made by `xlabench compilers add` (else: the jaxlib installed beside xlabench)."""
        return self.kind != "installed"

    @property
    def label(self) -> str:
        """How listings and messages name it."""
        if self.kind == "installed":
            return f"jaxlib {self.version} (installed)"
        if self.kind == "release":
            return f"jaxlib {self.version}"
        options = f", {' '.join(self.xla_flags)}" if self.xla_flags else ""
        return f"{self.name} (jaxlib {self.version}, {self.kind}{options})"

    def worker_environment(self) -> dict[str, str]:
        """What its workers' environment must hold beyond the defaults: its XLA options, build acceptance."""
        environment = {"XLA_FLAGS": " ".join(self.xla_flags)} if self.xla_flags else {}
        if self.build:
            environment[ACCEPT_BUILD_VARIABLE] = "1"
        return environment


_builds: dict[Compiler, str] = {}


def compiler_build(compiler: Compiler) -> str:
    """The compiler's build identity (`xlabench.xla.compilers.build_identity`): what every cache keys its
    results by."""
    if compiler not in _builds:
        _builds[compiler] = build_identity(compiler.version, compiler.python, compiler.xla_flags)
    return _builds[compiler]


def describe_compiler(compiler: Compiler) -> dict[str, Any]:
    """What records and reports keep of a compiler: name, kind, jaxlib, XLA options, base, build."""
    return {
        "name": compiler.name,
        "kind": compiler.kind,
        "jaxlib": compiler.version,
        "xla_flags": list(compiler.xla_flags),
        "base": compiler.base,
        "build": compiler_build(compiler),
    }


COMPILERS_DIRECTORY_VARIABLE = "XLABENCH_COMPILERS_DIR"


def compilers_directory(settings: Settings | None = None) -> str:
    """Where managed compilers live: $XLABENCH_COMPILERS_DIR or the cache's compilers/ (default: the
    settings in effect)."""
    return (settings or current()).compilers_directory


def installed_compiler() -> Compiler | None:
    """The jaxlib installed in this environment (read from package metadata, not imported), if any."""
    try:
        version = metadata.version("jaxlib")
    except metadata.PackageNotFoundError:
        return None
    return Compiler(version, version, sys.executable)


def _environment_python(directory: str) -> str:
    return os.path.join(directory, "Scripts" if os.name == "nt" else "bin", "python")


def _read_record(directory: str) -> dict[str, Any] | None:
    """A managed compiler's record, None when its folder has none (or an unreadable one)."""
    try:
        with open(os.path.join(directory, _RECORD)) as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None


def _broken(name: str, directory: str, why: str) -> UserInputError:
    """The one line for a managed compiler that cannot run."""
    return UserInputError(
        f"{compiler_title(name)}: the environment {directory} is broken ({why}); "
        f"`xlabench compilers remove {name}`, then add it again"
    )


def _from_record(name: str, directory: str, record: dict[str, Any]) -> Compiler:
    """The compiler a record describes (a variant's base resolved); UserInputError when it cannot run."""
    kind = record.get("kind", "release")  # records before compilers had kinds are releases
    if kind == "variant":
        try:  # the base lives beside the variant
            base = _resolve_in(str(record["base"]), os.path.dirname(directory))
        except UserInputError as error:
            raise UserInputError(
                f"compiler {name}: its base {record.get('base')} cannot run: {error}"
            ) from None
        flags = tuple(base.xla_flags) + tuple(record.get("xla_flags") or ())
        return Compiler(name, base.version, base.python, kind, flags, base.name, base.build)
    if kind == "python":
        python = str(record.get("interpreter"))
        try:
            version = interpreter_packages(python).get("jaxlib")
        except InterpreterQueryFailed as error:
            raise UserInputError(f"compiler {name}: its interpreter {python} does not run: {error}") from None
        if version is None:
            raise UserInputError(f"compiler {name}: its interpreter {python} has no jaxlib any more")
        return Compiler(name, str(version), python, kind, build=True)
    if kind not in ("release", "wheel"):
        raise _broken(name, directory, f"a record of kind {kind!r}")
    python = _environment_python(directory)
    if not os.access(python, os.X_OK):
        raise _broken(name, directory, "no interpreter")
    return Compiler(name, str(record.get("jaxlib")), python, kind, build=kind == "wheel")


def managed_compilers(settings: Settings | None = None) -> list[Compiler]:
    """Every compiler `xlabench compilers add` made that can run (in the compilers directory of
    `settings`, default those in effect): releases oldest first, then by name."""
    return [compiler for compiler in _managed_entries(settings) if isinstance(compiler, Compiler)]


def broken_compilers(settings: Settings | None = None) -> list[tuple[str, str]]:
    """(name, why) of each managed entry that cannot run (a removed base, a deleted interpreter), in the
    compilers directory of `settings` (default those in effect)."""
    return [entry for entry in _managed_entries(settings) if isinstance(entry, tuple)]


def _managed_entries(settings: Settings | None) -> list[Compiler | tuple[str, str]]:
    found: list[Compiler | tuple[str, str]] = []
    root = compilers_directory(settings)
    if not os.path.isdir(root):
        return found
    for name in os.listdir(root):
        directory = os.path.join(root, name)
        record = _read_record(directory) if not name.startswith(".") else None
        if record is None:
            continue
        try:
            found.append(_from_record(name, directory, record))
        except UserInputError as error:
            found.append((name, str(error)))

    def order(entry: Compiler | tuple[str, str]) -> tuple[int, tuple[int, ...], str]:
        name = entry.name if isinstance(entry, Compiler) else entry[0]
        return (0, parse_version(name), "") if is_release(name) else (1, (), name)

    return sorted(found, key=order)


def _check_name_form(name: str) -> None:
    """A release number, or a name of letters, digits and . _ + - (it names a folder)."""
    if not is_release(name) and not _NAME.fullmatch(name):
        raise UserInputError(
            f"{name!r}: not a compiler name (a release number, or up to 64 letters, digits and . _ + -)"
        )


def resolve_compiler(name: str | None = None, settings: Settings | None = None) -> Compiler:
    """The compiler named `name`, or by the settings (default: in effect; $XLABENCH_COMPILER), or else the
    installed one.

    Raises UserInputError (one line) for a release outside the supported range, a compiler not
    added, or a managed one that is broken.
    """
    settings = settings or current()
    return _resolve_in(name or settings.compiler, compilers_directory(settings))


def _resolve_in(name: str | None, root: str) -> Compiler:
    """The compiler named `name` (None: the installed one), managed ones looked for in `root`."""
    installed = installed_compiler()
    if name is None or (installed is not None and name == installed.name):
        if installed is None:
            raise UserInputError(
                "no jaxlib is installed here: install xlabench with its default jaxlib, or name an added "
                f"compiler (--compiler NAME, {COMPILER_VARIABLE})"
            )
        if not is_release(installed.version):  # a development build installed beside xlabench
            raise UserInputError(
                f"the installed jaxlib {installed.version} is a build, not a release: register it "
                f"(`xlabench compilers add --python {sys.executable} --name NAME`), then --compiler NAME"
            )
        check_supported(installed.version)
        return installed
    return _resolve_managed(name, root)


@functools.lru_cache(maxsize=64)
def _resolve_cached(name: str, root: str, stamp: float) -> Compiler:
    directory = os.path.join(root, name)
    record = _read_record(directory)
    if record is None:
        raise _broken(name, directory, f"no {_RECORD}")
    return _from_record(name, directory, record)


def _resolve_managed(name: str, root: str) -> Compiler:
    """A managed compiler by name, in `root` (remembered while its record is unchanged)."""
    if is_release(name):
        check_supported(name)
    _check_name_form(name)
    directory = os.path.join(root, name)
    if not os.path.isdir(directory):
        if is_release(name):
            raise UserInputError(f"jaxlib {name} is not added: run `xlabench compilers add {name}`")
        raise UserInputError(f"compiler {name} is not added (see `xlabench compilers list`)")
    try:
        stamp = os.stat(os.path.join(directory, _RECORD)).st_mtime_ns
    except OSError:
        raise _broken(name, directory, f"no {_RECORD}") from None
    return _resolve_cached(name, root, stamp)


def _check_new_name(name: str, root: str) -> None:
    """A name `add` may give: well formed, not a release number (kept for releases), not taken in
    `root`."""
    _check_name_form(name)
    if is_release(name):
        raise UserInputError(f"{name}: a release number names that release; give a build another --name")
    installed = installed_compiler()
    if (installed is not None and name == installed.name) or os.path.exists(os.path.join(root, name)):
        raise UserInputError(f"compiler {name} already exists (`xlabench compilers remove {name}` first)")


def add_compiler(
    version: str, progress: Callable[[str], None] = print, settings: Settings | None = None
) -> Compiler:
    """Make the managed environment of jaxlib release `version` (pip, showing its progress), in the
    compilers directory of `settings` (default those in effect).

    Already added: returned as it is. A release outside the range, or one the registry does not
    have: UserInputError, and nothing is left behind.
    """
    root = compilers_directory(settings or current())
    check_supported(version)
    installed = installed_compiler()
    if installed is not None and installed.version == version:
        progress(f"jaxlib {version} is the installed compiler: nothing to add")
        return installed
    target = os.path.join(root, version)
    with _name_lock(root):
        if _read_record(target) is not None:
            progress(f"jaxlib {version} is already added ({target})")
            return _resolve_in(version, root)
        if os.path.exists(target):
            raise UserInputError(
                f"jaxlib {version}: {target} exists but is not a finished environment; "
                f"`xlabench compilers remove {version}`, then add it again"
            )
        packages = [f"jax=={version}", f"jaxlib=={version}", f"numpy=={metadata.version('numpy')}"]
        record = {"kind": "release", "name": version, "jaxlib": version, "packages": packages}
        return _make_environment(root, version, f"jaxlib {version}", packages, record, progress)


@dataclass(frozen=True)
class WheelFile:
    """A wheel file's distribution and version, read from its own METADATA."""

    path: str
    distribution: str
    version: str
    sha256: str


def read_wheel(path: str) -> WheelFile:
    """The distribution and version of a wheel file; UserInputError (one line) for anything else."""
    if not os.path.isfile(path):
        raise UserInputError(f"{path}: no such file")
    if not path.endswith(".whl"):
        raise UserInputError(f"{path}: not a wheel (a .whl file, as `python build/build.py` in jax makes)")
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                raise UserInputError(f"{path}: not a wheel (no single *.dist-info/METADATA in it)")
            headers = HeaderParser().parsestr(archive.read(names[0]).decode("utf-8", "replace"))
    except zipfile.BadZipFile:
        raise UserInputError(f"{path}: not a wheel (not a zip archive)") from None
    distribution, version = headers.get("Name"), headers.get("Version")
    if not distribution or not version:
        raise UserInputError(f"{path}: not a wheel (its METADATA names no Name or Version)")
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    name = re.sub(r"[-_.]+", "-", distribution).lower()
    return WheelFile(os.path.abspath(path), name, version, digest.hexdigest())


def add_wheel_compiler(
    wheel: str,
    name: str,
    jax: str | None = None,
    jax_wheel: str | None = None,
    progress: Callable[[str], None] = print,
    settings: Settings | None = None,
) -> Compiler:
    """A managed environment from a local jaxlib wheel and a matching jax (a release, or a jax wheel), in
    the compilers directory of `settings` (default those in effect)."""
    root = compilers_directory(settings or current())
    _check_new_name(name, root)
    found = read_wheel(wheel)
    if found.distribution != "jaxlib":
        raise UserInputError(f"{wheel}: a wheel of {found.distribution}, not of jaxlib")
    if jax is not None and jax_wheel is not None:
        raise UserInputError("--jax and --jax-wheel both name the jax to install: give one")
    if jax_wheel is not None:
        jax_found = read_wheel(jax_wheel)
        if jax_found.distribution != "jax":
            raise UserInputError(f"{jax_wheel}: a wheel of {jax_found.distribution}, not of jax")
        jax_requirement = jax_found.path
    elif jax is not None:
        parse_version(jax)
        jax_requirement = f"jax=={jax}"
    elif is_release(found.version):
        jax_requirement = f"jax=={found.version}"
    else:
        raise UserInputError(
            f"{wheel}: jaxlib {found.version} is a development build: name its jax "
            "(--jax VERSION, or --jax-wheel PATH from the same jax checkout)"
        )
    packages = [found.path, jax_requirement, f"numpy=={metadata.version('numpy')}"]
    record = {
        "kind": "wheel",
        "name": name,
        "jaxlib": found.version,
        "wheel": {"path": found.path, "sha256": found.sha256},
        "packages": packages,
    }
    with _name_lock(root):
        _check_new_name(name, root)
        return _make_environment(root, name, f"compiler {name}", packages, record, progress, build=True)


def add_python_compiler(
    python: str, name: str, progress: Callable[[str], None] = print, settings: Settings | None = None
) -> Compiler:
    """Register an interpreter whose installed jaxlib is used as it is (nothing is installed into it), in
    the compilers directory of `settings` (default those in effect)."""
    root = compilers_directory(settings or current())
    _check_new_name(name, root)
    path = os.path.abspath(python)
    if not os.path.isfile(path) or not os.access(path, os.X_OK):
        raise UserInputError(f"{python}: no such interpreter (an executable python)")
    try:
        packages = interpreter_packages(path)
    except InterpreterQueryFailed as error:
        raise UserInputError(f"{python}: does not run as a Python interpreter: {error}") from None
    for package in ("jaxlib", "jax", "numpy"):
        if packages.get(package) is None:
            raise UserInputError(f"{python}: has no {package} installed (its own jax and jaxlib are used)")
    progress(f"[1/1] starting a compiler worker under {path} (jaxlib {packages['jaxlib']})")
    compiler = Compiler(name, str(packages["jaxlib"]), path, "python", build=True)
    record = {"kind": "python", "name": name, "interpreter": path, "jaxlib": packages["jaxlib"]}
    with _name_lock(root):
        _check_new_name(name, root)
        return _register(root, compiler, record, progress)


def parse_xla_flags(text: str) -> tuple[str, ...]:
    """XLA options as `XLA_FLAGS` holds them ("--xla_a=1 --xla_b"); UserInputError for anything else."""
    try:
        options = tuple(shlex.split(text))
    except ValueError as error:
        raise UserInputError(f"--xla-flags: {error}") from None
    if not options:
        raise UserInputError(
            "--xla-flags: no option given (e.g. --xla-flags=--xla_allow_excess_precision=false)"
        )
    for option in options:
        if not _XLA_OPTION.fullmatch(option):
            raise UserInputError(
                f"--xla-flags: {option!r} is not an XLA option (--xla_NAME or --xla_NAME=VALUE)"
            )
        name = option.split("=", 1)[0].removeprefix("--")
        for reserved, why in _DRIVER_OPTIONS.items():
            if name == reserved or (reserved.endswith("_") and name.startswith(reserved)):
                raise UserInputError(f"--xla-flags: {option.split('=', 1)[0]}: {why}")
    return options


# Options the driver sets on its own compiles (a pass run disables every other pass; dumps are how it
# reads what XLA did): a variant's value would hold in some compiles and not in others.
_PASSES = (
    "xlabench disables passes itself on every pass run; to gate a compiler without a pass use "
    "`--xlabench-disable-pass NAME` (pytest) or XLABENCH_DISABLE_PASSES"
)
_DRIVER_OPTIONS = {
    "xla_disable_hlo_passes": _PASSES,
    "xla_enable_hlo_passes_only": _PASSES,
    "xla_disable_all_hlo_passes": _PASSES,
    "xla_dump_": "xlabench dumps on its own compiles to read what XLA did; dump a module with XLA_FLAGS "
    "outside xlabench",
}


def add_variant_compiler(
    base: str,
    xla_flags: str,
    name: str,
    progress: Callable[[str], None] = print,
    settings: Settings | None = None,
) -> Compiler:
    """Another compiler with explicit XLA options passed to every compile; XLA must accept them. It goes
    in the compilers directory of `settings` (default those in effect)."""
    root = compilers_directory(settings or current())
    _check_new_name(name, root)
    options = parse_xla_flags(xla_flags)
    parent = _resolve_in(base, root)
    compiler = Compiler(
        name, parent.version, parent.python, "variant", parent.xla_flags + options, parent.name, parent.build
    )
    progress(f"[1/1] starting a compiler worker of {parent.label} with {' '.join(options)}")
    record = {
        "kind": "variant",
        "name": name,
        "base": parent.name,
        "xla_flags": list(options),
        "jaxlib": parent.version,
    }
    with _name_lock(root):
        _check_new_name(name, root)
        return _register(root, compiler, record, progress)


def _name_lock(root: str) -> Any:
    """Two adds of one name at once: the second waits, then finds it taken. One lock file for every
    name, beside the folder `root` (adds are rare; no file a name piles up, and the folder holds compilers
    only)."""
    from filelock import FileLock  # the caller's side only: compiler workers never add

    os.makedirs(root, exist_ok=True)
    return FileLock(f"{root.rstrip(os.sep)}-add.lock")


def _register(
    root: str, compiler: Compiler, record: dict[str, Any], progress: Callable[[str], None]
) -> Compiler:
    """Probe a compiler that needs no environment of its own, then write its folder (record only) in
    `root`."""
    started = time.monotonic()
    answer = _probe(compiler)
    record = {**record, "api": answer["api"], "made": _now()}
    target = os.path.join(root, compiler.name)
    building = tempfile.mkdtemp(prefix=f".{compiler.name}-", dir=root)
    try:
        write_json(os.path.join(building, _RECORD), record)
        os.replace(building, target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    progress(
        f"added {compiler.label} in {time.monotonic() - started:.0f} s: the API of jaxlib {answer['api']}"
    )
    return compiler


def _make_environment(
    root: str,
    name: str,
    subject: str,
    packages: list[str],
    record: dict[str, Any],
    progress: Callable[[str], None],
    build: bool = False,
) -> Compiler:
    """Build a venv with `packages` in a temporary folder of `root`, probe it, record it, rename it into
    place."""
    target = os.path.join(root, name)
    building = tempfile.mkdtemp(prefix=f".{name}-", dir=root)
    started = time.monotonic()
    try:
        progress(f"[1/3] creating an environment for {subject}")
        _run([sys.executable, "-m", "venv", "--clear", building], f"{subject}: venv failed")
        progress(f"[2/3] pip install {' '.join(packages)}")
        _pip_install(_environment_python(building), packages, subject, progress)
        progress("[3/3] starting a compiler worker in it")
        python = _environment_python(building)
        kind = str(record["kind"])
        answer = _probe(Compiler(name, str(record["jaxlib"]), python, kind, build=build))
        if answer["jaxlib"] != record["jaxlib"]:
            raise UserInputError(f"{subject}: the new environment's worker reports jaxlib {answer['jaxlib']}")
        full = {**record, "api": answer["api"], "python": sys.version.split()[0], "made": _now()}
        write_json(os.path.join(building, _RECORD), full)
        _relocate(building, target)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    progress(f"added {subject} in {time.monotonic() - started:.0f} s: {target}")
    return Compiler(name, str(record["jaxlib"]), _environment_python(target), kind, build=build)


def _pinned(packages: list[str]) -> str:
    """The registry packages of an install, said briefly: "jax/jaxlib 0.8.5", or "jax 0.10.3"."""
    pins = [
        package.split("==") for package in packages if "==" in package and not package.startswith("numpy")
    ]
    versions = {version for _, version in pins}
    if len(pins) > 1 and len(versions) == 1:
        return "/".join(name for name, _ in pins) + f" {versions.pop()}"
    return ", ".join(f"{name} {version}" for name, version in pins) or "package named"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def remove_compiler(name: str, settings: Settings | None = None) -> str:
    """Delete a managed compiler (finished or broken) from the compilers directory of `settings` (default
    those in effect); return its folder. A base of variants stays."""
    root = compilers_directory(settings or current())
    _check_name_form(name)
    target = os.path.join(root, name)
    if not os.path.isdir(target):
        raise UserInputError(f"{compiler_title(name)} is not added (see `xlabench compilers list`)")
    dependants = sorted(
        other
        for other in os.listdir(root)
        if (record := _read_record(os.path.join(root, other))) is not None
        and record.get("kind") == "variant"
        and record.get("base") == name
    )
    if dependants:
        raise UserInputError(
            f"compiler {name}: the variant(s) {', '.join(dependants)} run on it: remove them first"
        )
    # Rename first: a removal cut short never leaves a folder that looks like a compiler.
    doomed = tempfile.mkdtemp(prefix=f".{name}-removing-", dir=root)
    os.replace(target, os.path.join(doomed, name))
    shutil.rmtree(doomed, ignore_errors=True)
    _resolve_cached.cache_clear()
    return target


def _run(command: list[str], failure: str) -> None:
    finished = subprocess.run(command, capture_output=True, text=True)
    if finished.returncode != 0:
        last = (finished.stderr or finished.stdout).strip().splitlines()
        raise UserInputError(f"{failure}: {last[-1] if last else f'exit {finished.returncode}'}")


def _pip_install(python: str, packages: list[str], subject: str, progress: Callable[[str], None]) -> None:
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
            raise UserInputError(f"{subject}: the package registry has no {_pinned(packages)}")
        raise UserInputError(
            f"{subject}: pip failed: {errors[-1] if errors else f'exit {process.returncode}'}"
        )


def _probe(compiler: Compiler) -> dict[str, str]:
    """Start one worker of `compiler` and compile the probe module: {"jaxlib": version, "api": release}.

    A worker that does not start or dies (a missing jax, an option XLA rejects) is one line, with
    XLA's own fatal line when it printed one."""

    worker = Worker(compiler.worker_environment(), compiler.python)
    try:
        return dict(worker.call("probe_build", {}, timeout=300))
    except UnsupportedCompiler as error:  # the adapter found no supported release's API in it
        raise UserInputError(f"{compiler.label}: refused: {error}") from None
    except (WorkerDied, WorkerTimedOut) as failure:
        # XLA's own lines (glog: E or F, then the date) come before the usage text it may print after.
        try:
            with open(worker.stderr_path, errors="replace") as handle:
                logged = handle.read().splitlines()
        except OSError:
            logged = failure.stderr_tail.splitlines()
        xla_lines = [line.split("] ", 1)[-1] for line in logged if re.match(r"^[EF]\d{4} ", line)]
        rejected = next((line for line in xla_lines if _REJECTED_OPTION.search(line)), None)
        if rejected is None and any("Flag parsing failed" in line for line in xla_lines):
            # A value only the option's own parser refuses: XLA names the options in its usage line.
            usage = next((line for line in logged if line.startswith("usage: ")), "usage: ?")
            rejected = f"it cannot parse {usage.removeprefix('usage: ')}"
        if rejected is not None:
            raise UserInputError(f"compiler {compiler.name}: XLA rejects its options: {rejected}") from None
        tail = failure.stderr_tail.strip().splitlines()
        last = xla_lines[-1] if xla_lines else (tail[-1] if tail else None)
        raise UserInputError(
            f"{compiler.label}: its compiler worker does not start: {failure}" + (f": {last}" if last else "")
        ) from None
    finally:
        worker.close()


def _relocate(source: str, target: str) -> None:
    """Move a finished environment into place.

    Its interpreter finds its packages from where it stands (pyvenv.cfg beside bin/), so a moved venv
    works; only pip's own launcher scripts keep the old path, and xlabench runs `python -m pip`.
    """
    os.replace(source, target)
