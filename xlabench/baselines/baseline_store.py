"""Stored baselines: what each policy achieved on each graph, kept so that any later run can be judged.

Layout: `baselines/<policy name>/<graph>.json` (one file a graph: I, D, R, the runtime ratio -- the
median of `runtime_ratios`, several measurements -- the sequence, and `previous`: the R and runtime
ratio of the policy version before, when one was stored) and
`baselines/<policy name>/metadata.json` (the policy version, jaxlib, machine, and the sha256 of every
graph file). Every file is written atomically; each graph has a file of its own, so
workers that each judge other graphs never write one file. Files are plain JSON, never pickle.

A baseline is refused (one line naming the file) when a graph file's checksum does not match, when it
was made with another version of the policy, or -- unless the caller allows a jaxlib change, which is
how a jaxlib bump is gated -- with another jaxlib.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xlabench.baselines.baseline_records import BaselineEntry, PreviousVersion
from xlabench.errors import UserInputError
from xlabench.eval.evaluation_records import EvaluationRow
from xlabench.files import checkout_directory, json_bytes, write_atomically
from xlabench.settings import Settings, current
from xlabench.xla.shared.releases import compiler_title

FORMAT = 1
METADATA_FILE = "metadata.json"
# In a set being stored split by split: per graph not measured again yet, the version before's figures.
PREVIOUS_KEY = "previous_versions"


class BaselineError(UserInputError):
    """A baseline that cannot be read or trusted; the message names the file."""


def baselines_directory(settings: Settings | None = None) -> Path:
    """Where baselines live: the settings' (default: in effect; $XLABENCH_BASELINES_DIR,
    --xlabench-baselines), else the checkout's `baselines/`, else (installed from a wheel) `baselines/` in
    the current directory: a project's own, never inside site-packages."""
    configured = (settings or current()).baselines_directory
    if configured is not None:
        return configured
    checkout = checkout_directory()
    return checkout / "baselines" if checkout is not None else Path.cwd() / "baselines"


def machine() -> dict[str, Any]:
    """The machine a baseline's runtimes were measured on."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "system": platform.platform()}


def _sha256(data: bytes) -> str:

    return hashlib.sha256(data).hexdigest()


def _encode(data: dict[str, Any]) -> bytes:
    # Sorted keys: a record's bytes (and so its checksum) do not depend on the order it was built in.
    return json_bytes(data, sort_keys=True)


@dataclass
class BaselineSet:
    """The stored baselines of one policy: metadata, and graph records read (and verified) on demand."""

    directory: Path
    metadata: dict[str, Any]

    @property
    def policy(self) -> str:
        """The policy version the baselines were made with (name@vX.Y)."""
        return str(self.metadata["policy"])

    def graph_names(self) -> list[str]:
        """Graphs with a stored baseline."""
        return sorted(self.metadata["graphs"])

    def get(self, graph: str) -> BaselineEntry | None:
        """The stored record of `graph` (None when it has none); a tampered file raises BaselineError."""
        entry = self.metadata["graphs"].get(graph)
        if entry is None:
            return None
        file = self.directory / f"{graph}.json"
        try:
            data = file.read_bytes()
        except OSError as error:
            raise BaselineError(f"{file}: unreadable: {error.strerror or error}") from None
        if _sha256(data) != entry["sha256"]:
            raise BaselineError(
                f"{file}: checksum mismatch with {self.directory / METADATA_FILE}: the file is corrupt or "
                "was edited (regenerate with `xlabench baselines update`)"
            )
        return BaselineEntry.from_json(json.loads(data))


def made_with(metadata: dict[str, Any]) -> str:
    """The name of the compiler a baseline set was made with (sets made before compilers had names:
    their jaxlib release, which is that release's name)."""
    record = metadata.get("compiler")
    return (
        str(record["name"]) if isinstance(record, dict) and "name" in record else str(metadata.get("jaxlib"))
    )


def load(
    policy_name: str,
    policy_label: str | None = None,
    compiler_name: str | None = None,
    allow_jaxlib_change: bool = False,
    root: Path | None = None,
) -> BaselineSet | None:
    """The stored baselines of a policy (None when there are none), checked against what is under test."""
    directory = (root or baselines_directory()) / policy_name
    file = directory / METADATA_FILE
    if not file.exists():
        return None
    try:
        metadata = json.loads(file.read_text())
    except (OSError, ValueError) as error:
        raise BaselineError(f"{file}: unreadable: {error}") from None
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT or "graphs" not in metadata:
        raise BaselineError(f"{file}: not a baseline metadata file of format {FORMAT}")
    update = f"`xlabench baselines update --policy {policy_name}`"
    if policy_label is not None and metadata.get("policy") != policy_label:
        raise BaselineError(
            f"{file}: made with {metadata.get('policy')}, the policy under test is {policy_label}; "
            f"run {update}"
        )
    if compiler_name is not None and made_with(metadata) != compiler_name and not allow_jaxlib_change:
        raise BaselineError(
            f"{file}: made with {compiler_title(made_with(metadata))}, this run compiles with "
            f"{compiler_title(compiler_name)}; to replace it run {update}"
        )
    return BaselineSet(directory, metadata)


def write(
    policy_name: str,
    policy_label: str,
    compiler_name: str,
    rows: list[EvaluationRow],
    root: Path | None = None,
    compiler: dict[str, Any] | None = None,
) -> Path:
    """Store one record a graph for the rows that succeeded, then the metadata (atomic writes).

    Graphs already stored for the same policy version and compiler that `rows` does not cover are kept;
    anything made with another version or compiler is replaced as a whole. Each record keeps what the
    previous policy version achieved on its graph (`previous`), so the gate can hold the new one to it.
    """
    directory = (root or baselines_directory()) / policy_name
    previous = None
    try:
        previous = load(policy_name, policy_label, compiler_name, root=root)
    except BaselineError:
        previous = None  # another version, jaxlib or a damaged set: start over
    versions = previous_versions(policy_name, policy_label, root)
    graphs: dict[str, Any] = dict(previous.metadata["graphs"]) if previous is not None else {}
    if previous is None and directory.is_dir():
        for stale in directory.glob("*.json"):
            stale.unlink()
    for row in rows:
        if row.error is not None or row.policy_ops is None:
            continue
        data = _encode(BaselineEntry.from_row(row, versions.get(row.name)).to_json())
        write_atomically(directory / f"{row.name}.json", data)
        graphs[row.name] = {"sha256": _sha256(data), "R": row.policy_ops}
    metadata = {
        "format": FORMAT,
        "policy": policy_label,
        "jaxlib": compiler["jaxlib"] if compiler else compiler_name,
        **({"compiler": compiler} if compiler else {}),
        "machine": machine(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "graphs": dict(sorted(graphs.items())),
    }
    # A new version stored split by split: what the version before achieved on the graphs not yet
    # measured again waits here, so each later part still holds them to it.
    waiting = {graph: versions[graph].to_json() for graph in sorted(versions) if graph not in graphs}
    if waiting:
        metadata[PREVIOUS_KEY] = waiting
    write_atomically(directory / METADATA_FILE, _encode(metadata))
    return directory


def previous_versions(
    policy_name: str, policy_label: str, root: Path | None = None
) -> dict[str, PreviousVersion]:
    """Per graph, what the policy version before `policy_label` achieved: read from the stored set when
    it was made with another version, carried over from its records when made with this one. Empty when
    nothing before is stored (or it is damaged).
    """
    try:
        stored = load(policy_name, root=root)
        if stored is None:
            return {}
        versions = {}
        for graph in stored.graph_names():
            record = stored.get(graph)
            if stored.policy == policy_label:
                if record is not None and record.previous is not None:
                    versions[graph] = record.previous
            else:
                if record is None or record.policy_ops is None:
                    raise KeyError("R")  # a record without its op count: damaged
                versions[graph] = PreviousVersion(
                    stored.policy, stored.metadata.get("jaxlib"), record.policy_ops, record.runtime_ratio
                )
        if stored.policy == policy_label:  # graphs this version has not measured yet (see `write`)
            for graph, document in (stored.metadata.get(PREVIOUS_KEY) or {}).items():
                versions.setdefault(graph, PreviousVersion.from_json(document))
        return versions
    except (BaselineError, KeyError, ValueError, TypeError):
        return {}  # a damaged set is replaced as a whole; there is nothing to hold the new version to
