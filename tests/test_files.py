"""Atomic writes: an interrupted write keeps the old file and leaves no debris."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from xlabench import files


@pytest.mark.parametrize("interrupted_call", ["fsync", "replace"])
def test_an_interrupted_write_keeps_the_old_file(tmp_path: Path, monkeypatch, interrupted_call: str) -> None:
    target = tmp_path / "graph.hlo.gz"
    files.write_atomically(target, b"old")

    def interrupt(*arguments: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(files.os, interrupted_call, interrupt)
    with pytest.raises(KeyboardInterrupt):
        files.write_atomically(target, b"new")
    assert target.read_bytes() == b"old"
    assert [path.name for path in tmp_path.iterdir()] == ["graph.hlo.gz"]


def test_a_write_creates_missing_directories(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b" / "out.hlo"
    files.write_atomically(str(target), b"HloModule m")
    assert target.read_bytes() == b"HloModule m"


def test_a_written_file_gets_the_usual_mode_not_a_private_one(tmp_path: Path) -> None:
    umask = os.umask(0o022)
    os.umask(umask)
    files.write_atomically(tmp_path / "report.md", b"# report\n")
    assert (tmp_path / "report.md").stat().st_mode & 0o777 == 0o666 & ~umask
