"""The stored policies as `xlabench policies list` shows them: each one's latest version, or every
version's metadata."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xlabench.policies.artifact import policy_names, read_metadata, resolve, versions


@dataclass(frozen=True)
class StoredPolicy:
    """A stored policy: its name, its versions (oldest first) and its latest version's metadata."""

    name: str
    versions: tuple[tuple[int, int], ...]
    latest: dict[str, Any]


def stored_policies(root: Path | None = None) -> list[StoredPolicy]:
    """Every policy with a version in `root` (default the policies directory), by name."""
    return [
        StoredPolicy(name, tuple(versions(name, root)), read_metadata(resolve(name, root)))
        for name in policy_names(root)
    ]


def every_version(root: Path | None = None) -> list[dict[str, Any]]:
    """The metadata of every stored version: policy by policy (by name), oldest version first."""
    return [
        read_metadata(resolve(f"{name}@v{major}.{minor}", root))
        for name in policy_names(root)
        for major, minor in versions(name, root)
    ]
