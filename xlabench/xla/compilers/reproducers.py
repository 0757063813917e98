"""Reproducers: a module, the passes that broke it and what happened, in one folder a user can replay."""

from __future__ import annotations

import os
from typing import Any

from xlabench.files import write_atomically, write_json
from xlabench.xla.shared import payloads


def write_reproducer(
    directory: str | os.PathLike[str],
    module_text: str,
    passes: list[str],
    details_file: str,
    details: dict[str, Any],
) -> str:
    """Write module.hlo, the payloads it names, passes.txt and `details_file` (JSON); return the directory.

    Constants named by payload go along (no compiler call is made to print them in full: the writer
    may be reporting a crash of the compiler).
    """
    directory = os.fspath(directory)
    write_atomically(os.path.join(directory, "module.hlo"), module_text.encode())
    for digest in payloads.without_markers(module_text)[1].values():
        try:
            literal = payloads.load(digest)
        except payloads.MissingPayload:
            continue
        write_atomically(os.path.join(directory, "payloads", digest[:2], digest), literal)
    write_atomically(os.path.join(directory, "passes.txt"), ("\n".join(passes) + "\n").encode())
    write_json(os.path.join(directory, details_file), details)
    return directory
