"""What a run's environment and its entry point decide, as one typed, frozen record: `Settings`.

The `XLABENCH_*` environment variables are read here and nowhere else on the caller's side
(`from_environment`). An entry point lays its own options over them once -- the command line
(`xlabench --compiler ...`), the pytest plugin (`--xlabench-policies`, the ini keys, ...) -- and passes the
result down: to the drivers, pools, caches and stores it makes. For the length of a command the entry point
also puts its settings in effect (`in_effect`), so that a library function called without settings
(`current()`) runs as the command was asked to, not as the environment alone says. The library never
writes an environment variable.

A compiler worker is another process: its pool starts it with the variables it needs
(`Settings.worker_environment`, and what the pool itself tells it: `WorkerStart`), and the worker reads
them here too (`current()`, `worker_start()`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import ParamSpec, TypeVar

from xlabench.errors import UserInputError

# What a compiler worker's pool tells it, beyond the settings (`WorkerStart`): not for users to set.
ACCEPT_BUILD_VARIABLE = "XLABENCH_ACCEPT_BUILD"  # "1": a compiler registered as a build
BUILD_VARIABLE = "XLABENCH_COMPILER_BUILD"  # the build identity its executables are filed under
SCRATCH_DIRECTORY_VARIABLE = "XLABENCH_SCRATCH_DIR"  # the folder its dumps go in (the parent removes it)

# Each variable a user may set, with what it decides (`xlabench --help` and docs/driver.md list them).
VARIABLES = {
    "XLABENCH_CACHE_DIR": "the cache directory (default ~/.cache/xlabench, or $XDG_CACHE_HOME/xlabench)",
    "XLABENCH_NO_CACHE": "1: no transition cache (every pass runs in XLA)",
    "XLABENCH_CACHE_MAX_MB": "size past which the oldest cached transitions go (default 4096)",
    "XLABENCH_EXECUTABLE_CACHE": "0: compile every executable that is timed or run, keep none",
    "XLABENCH_EXECUTABLE_CACHE_MAX_MB": "size past which the least recently used executables go (2048)",
    "XLABENCH_CRASH_DIR": "where crash and hang reproducers go (default the cache's crashes/)",
    "XLABENCH_COMPILERS_DIR": "where added compilers live (default the cache's compilers/)",
    "XLABENCH_COMPILER": "the compiler to run (a release or an added name; default the installed jaxlib)",
    "XLABENCH_DISABLE_PASSES": "passes turned off in every compile, comma-separated (a simulated change)",
    "XLABENCH_WORKERS": "compiler worker processes per pool (default 1)",
    "XLABENCH_COMPILER_TIMEOUT": "seconds before a compiler call counts as a hang (default 300)",
    "XLABENCH_TIMING_SLOT": "the core a process times executables on (default the pytest-xdist worker's)",
    "XLABENCH_POLICIES_DIR": "the policies directory (default the checkout's policies/, else the package's)",
    "XLABENCH_BASELINES_DIR": "the baselines directory (default the checkout's baselines/)",
    "XLABENCH_TENSORFLOW_PYTHON": "the Python with TensorFlow that lowers the tensorflow family's graphs",
}

DEFAULT_WORKERS = 1
DEFAULT_COMPILER_TIMEOUT_SECONDS = 300.0
DEFAULT_CACHE_MAX_MEGABYTES = 4096.0
DEFAULT_EXECUTABLE_CACHE_MAX_MEGABYTES = 2048.0


@dataclass(frozen=True)
class Settings:
    """Everything the environment and the entry point decide for a run (see the module's docstring)."""

    cache_directory: str
    compilers_directory: str
    crash_directory: str
    use_cache: bool = True
    cache_max_megabytes: float = DEFAULT_CACHE_MAX_MEGABYTES
    executable_cache: bool = True
    executable_cache_max_megabytes: float = DEFAULT_EXECUTABLE_CACHE_MAX_MEGABYTES
    compiler: str | None = None  # a release or an added compiler's name; None: the installed jaxlib
    disabled_passes: tuple[str, ...] = ()
    workers: int = DEFAULT_WORKERS
    compiler_timeout_seconds: float = DEFAULT_COMPILER_TIMEOUT_SECONDS
    timing_slot: int | None = None  # the core executables are timed on; None: chosen by process id
    policies_directory: Path | None = None  # None: the checkout's policies/, else the package's
    baselines_directory: Path | None = None  # None: the checkout's baselines/, else ./baselines
    tensorflow_python: str | None = None

    @classmethod
    def from_environment(cls, environment: Mapping[str, str] | None = None) -> Settings:
        """Settings from the `XLABENCH_*` variables (`from_environment`)."""
        return from_environment(environment)

    def with_options(self, **options: object) -> Settings:
        """These settings with an entry point's options laid over them (None leaves a setting as it is)."""
        given = {name: value for name, value in options.items() if value is not None}
        if "disabled_passes" in given:
            given["disabled_passes"] = tuple(dict.fromkeys(given["disabled_passes"]))  # type: ignore[call-overload]
        return dataclasses.replace(self, **given)  # type: ignore[arg-type]

    def worker_environment(self) -> dict[str, str]:
        """The variables a compiler worker started under these settings reads (where its caches are)."""
        environment = {
            "XLABENCH_CACHE_DIR": self.cache_directory,
            "XLABENCH_EXECUTABLE_CACHE": "1" if self.executable_cache else "0",
            "XLABENCH_EXECUTABLE_CACHE_MAX_MB": repr(self.executable_cache_max_megabytes),
        }
        if self.timing_slot is not None:
            environment["XLABENCH_TIMING_SLOT"] = str(self.timing_slot)
        return environment

    def driver_key(self) -> tuple[object, ...]:
        """What decides a driver's behaviour (every setting but the policies, baselines and TensorFlow
        ones): equal keys may share one driver (and its pool)."""
        ignored = ("policies_directory", "baselines_directory", "tensorflow_python")
        return tuple(
            getattr(self, field.name) for field in dataclasses.fields(self) if field.name not in ignored
        )

    def carried(self) -> dict[str, object]:
        """What work in another process -- perhaps on another machine -- takes from these settings: what
        the command chose. The rest (where its caches are, the core it times on) is that process's own:
        `carried_over(settings.carried())` there."""
        return {
            "compiler": self.compiler,
            "disabled_passes": self.disabled_passes,
            "use_cache": self.use_cache,
            "compiler_timeout_seconds": self.compiler_timeout_seconds,
            "policies_directory": self.policies_directory,
            "baselines_directory": self.baselines_directory,
        }


def from_environment(environment: Mapping[str, str] | None = None) -> Settings:
    """Settings from the `XLABENCH_*` variables (default: this process's environment); a bad value raises
    UserInputError naming the variable."""
    variables = os.environ if environment is None else environment

    def text(name: str) -> str | None:
        return variables.get(name) or None  # set but empty is unset, as a shell user means it

    cache = text("XLABENCH_CACHE_DIR") or os.path.join(
        text("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "xlabench"
    )
    return Settings(
        cache_directory=cache,
        compilers_directory=text("XLABENCH_COMPILERS_DIR") or os.path.join(cache, "compilers"),
        crash_directory=text("XLABENCH_CRASH_DIR") or os.path.join(cache, "crashes"),
        use_cache=not _flag(variables, "XLABENCH_NO_CACHE", False),
        cache_max_megabytes=_number(variables, "XLABENCH_CACHE_MAX_MB", DEFAULT_CACHE_MAX_MEGABYTES),
        executable_cache=_flag(variables, "XLABENCH_EXECUTABLE_CACHE", True),
        executable_cache_max_megabytes=_number(
            variables, "XLABENCH_EXECUTABLE_CACHE_MAX_MB", DEFAULT_EXECUTABLE_CACHE_MAX_MEGABYTES
        ),
        compiler=text("XLABENCH_COMPILER"),
        disabled_passes=tuple(
            dict.fromkeys(
                name.strip() for name in (text("XLABENCH_DISABLE_PASSES") or "").split(",") if name.strip()
            )
        ),
        workers=int(_number(variables, "XLABENCH_WORKERS", DEFAULT_WORKERS, whole=True)),
        compiler_timeout_seconds=_number(
            variables, "XLABENCH_COMPILER_TIMEOUT", DEFAULT_COMPILER_TIMEOUT_SECONDS
        ),
        timing_slot=_timing_slot(variables),
        policies_directory=_directory(text("XLABENCH_POLICIES_DIR")),
        baselines_directory=_directory(text("XLABENCH_BASELINES_DIR")),
        tensorflow_python=text("XLABENCH_TENSORFLOW_PYTHON"),
    )


@dataclass(frozen=True)
class WorkerStart:
    """What a compiler worker's pool tells it when it starts, beyond the settings."""

    compiler_build: str | None  # None: file executables under the release
    scratch_directory: str | None  # None: the temp directory
    accept_build: bool  # a compiler registered as a build: any version with a supported release's API


def worker_start(environment: Mapping[str, str] | None = None) -> WorkerStart:
    """What this worker's pool told it (default: this process's environment)."""
    variables = os.environ if environment is None else environment
    return WorkerStart(
        compiler_build=variables.get(BUILD_VARIABLE) or None,
        scratch_directory=variables.get(SCRATCH_DIRECTORY_VARIABLE) or None,
        accept_build=variables.get(ACCEPT_BUILD_VARIABLE) == "1",
    )


def carried_over(carried: Mapping[str, object]) -> Settings:
    """In another process: its own environment's settings with what the command chose laid over them
    (`Settings.carried`)."""
    return from_environment().with_options(**carried)


def _timing_slot(variables: Mapping[str, str]) -> int | None:
    """$XLABENCH_TIMING_SLOT, else the pytest-xdist worker's number (gw0, gw1, ...: one core each, never
    two on one); a slot that is not a number is refused."""
    given = variables.get("XLABENCH_TIMING_SLOT", "")
    if given:
        if not given.isdigit():
            raise UserInputError(f"XLABENCH_TIMING_SLOT={given!r}: expected a whole number from 0")
        return int(given)
    xdist = variables.get("PYTEST_XDIST_WORKER", "")[2:]
    return int(xdist) if xdist.isdigit() else None


def _flag(variables: Mapping[str, str], name: str, default: bool) -> bool:
    value = variables.get(name, "")
    if value == "":
        return default
    if value not in ("0", "1"):
        raise UserInputError(f"{name}={value!r}: expected 0 or 1")
    return value == "1"


def _number(variables: Mapping[str, str], name: str, default: float, whole: bool = False) -> float:
    value = variables.get(name, "")
    if value == "":
        return default
    try:
        number = int(value) if whole else float(value)
    except ValueError:
        number = 0
    if not number > 0:
        kind = "a whole number" if whole else "a number"
        raise UserInputError(f"{name}={value!r}: expected {kind} above 0")
    return number


def _directory(value: str | None) -> Path | None:
    return Path(value) if value else None


_in_effect: list[Settings] = []
_in_effect_lock = threading.Lock()


def current() -> Settings:
    """The settings an entry point put in effect (`in_effect`), else the environment's, read now."""
    with _in_effect_lock:
        if _in_effect:
            return _in_effect[-1]
    return from_environment()


@contextlib.contextmanager
def in_effect(settings: Settings) -> Iterator[Settings]:
    """Put `settings` in effect for this process until the block ends (entry points only: a command, a
    pytest session)."""
    with _in_effect_lock:
        _in_effect.append(settings)
    try:
        yield settings
    finally:
        with _in_effect_lock:
            _in_effect.remove(settings)


_Parameters = ParamSpec("_Parameters")
_Result = TypeVar("_Result")


def runs_under_its_settings(function: Callable[_Parameters, _Result]) -> Callable[_Parameters, _Result]:
    """For a library entry function with a `settings=` keyword: the settings it is given (default: those
    in effect) are in effect while it runs, so that code it calls without them runs under them too."""

    @functools.wraps(function)
    def run(*args: _Parameters.args, **kwargs: _Parameters.kwargs) -> _Result:
        settings = kwargs.get("settings") or current()
        kwargs["settings"] = settings
        with in_effect(settings):  # type: ignore[arg-type]
            return function(*args, **kwargs)

    return run
