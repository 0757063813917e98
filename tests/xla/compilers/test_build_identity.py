"""A kept cache is keyed by the compiler build: a jaxlib rebuilt under one version is another compiler."""

from __future__ import annotations

import ast
import os
import time
from pathlib import Path

import pytest

from xlabench.xla.compilers import build_identity


@pytest.fixture
def managed_jaxlib(tmp_path, monkeypatch):
    """A managed compiler's layout (env/bin/python, env/lib/python3.11/site-packages/jaxlib/*.so)."""
    monkeypatch.setenv("XLABENCH_CACHE_DIR", str(tmp_path / "cache"))
    package = tmp_path / "env" / "lib" / "python3.11" / "site-packages" / "jaxlib"
    (package / "mlir").mkdir(parents=True)
    (package / "libjax_common.so").write_bytes(b"\x7fELF the compiler" * 1000)
    (package / "mlir" / "_mlir.so").write_bytes(b"\x7fELF mlir")
    (package / "version.py").write_text("__version__ = '0.10.2'\n")
    (tmp_path / "env" / "bin").mkdir()
    return str(tmp_path / "env" / "bin" / "python"), package


def test_a_rebuilt_jaxlib_of_the_same_version_is_another_build(managed_jaxlib):
    python, package = managed_jaxlib
    before = build_identity.build_identity("0.10.2", python)
    assert before.startswith("0.10.2+") and before.endswith("." + build_identity.worker_code_digest()[:8])
    assert build_identity.build_identity("0.10.2", python) == before  # stable
    # A patched pass: the same version, other native bytes (and, as a rebuild does, another mtime).
    library = package / "libjax_common.so"
    library.write_bytes(library.read_bytes().replace(b"compiler", b"patched!"))
    os.utime(library, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    after = build_identity.build_identity("0.10.2", python)
    assert after != before and after.startswith("0.10.2+")
    # Python files are not the compiler: editing one keeps the build.
    (package / "version.py").write_text("__version__ = '0.10.2'  # edited\n")
    assert build_identity.build_identity("0.10.2", python) == after


def test_the_digest_is_remembered_per_file_list_and_survives_a_damaged_memo(managed_jaxlib, tmp_path):
    _, package = managed_jaxlib
    first = build_identity.native_digest(str(package))
    memo = tmp_path / "cache" / "compiler-builds.json"
    assert memo.exists() and first in memo.read_text()
    memo.write_text("{ not json")
    assert build_identity.native_digest(str(package)) == first
    assert first in memo.read_text()


def test_the_installed_jaxlib_has_a_build(tmp_path, monkeypatch):
    import sys

    monkeypatch.setenv("XLABENCH_CACHE_DIR", str(tmp_path))
    directory = build_identity.jaxlib_directory(sys.executable)
    assert directory is not None and os.path.isdir(directory)
    assert build_identity.build_identity("0.10.2", sys.executable).split("+")[1].split(".")[0] != "unknown"


def _xla_imports(path: Path) -> set[str]:
    """The files of xlabench.xla that `path` imports (at any depth of its code), relative to the package."""
    package = Path(build_identity.__file__).parent.parent
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("xlabench.xla"):
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in (name for name in names if name.count(".") >= 2):  # a module of xlabench.xla
            relative = Path(*name.split(".")[2:])
            for candidate in (relative.with_suffix(".py"), relative / "__init__.py"):
                if (package / candidate).is_file():
                    found.add(candidate.as_posix())
    return found


def test_every_module_the_worker_runs_is_in_the_build_digest_or_named_as_deciding_no_record():
    package = Path(build_identity.__file__).parent.parent
    entry = ["worker/__main__.py", "worker/registry.py"]
    reached, frontier = set(entry), list(entry)
    while frontier:
        for name in _xla_imports(package / frontier.pop()) - reached:
            reached.add(name)
            frontier.append(name)
    digested = set(build_identity.worker_modules())
    assert reached <= digested | set(build_identity.NOT_RESULT_CODE), sorted(reached - digested)
    assert all((package / name).is_file() for name in build_identity.NOT_RESULT_CODE)
    assert "worker/registry.py" in digested and "shared/module_structure.py" in digested


def test_an_edit_to_a_worker_module_changes_the_digest_and_one_to_the_caller_side_does_not(
    tmp_path, monkeypatch
):
    package = Path(build_identity.__file__).parent.parent
    copy = tmp_path / "xla"
    for folder in ("worker", "shared", "compilers"):
        for path in (package / folder).rglob("*.py"):
            target = copy / path.relative_to(package)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    monkeypatch.setattr(build_identity, "__file__", str(copy / "compilers" / "build_identity.py"))
    build_identity.worker_code_digest.cache_clear()
    try:
        before = build_identity.worker_code_digest()
        (copy / "compilers" / "worker_pool.py").write_text("# caller side\n")
        (copy / "worker" / "executable_timing.py").write_text("# decides no cached record\n")
        assert build_identity.worker_code_digest.__wrapped__() == before
        (copy / "shared" / "module_structure.py").write_text("# the fingerprint changed\n")
        assert build_identity.worker_code_digest.__wrapped__() != before
    finally:
        build_identity.worker_code_digest.cache_clear()
