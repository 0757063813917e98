"""Versioned policy artifacts: `policies/<name>/vMAJOR.MINOR/` with weights, metadata and a changelog.

A version holds `weights.safetensors` (tensors only: loading never runs pickled code) and
`metadata.json`: the jaxlib version and catalogue hash it was trained against, the action list and
observation spec, algorithm, hyperparameters, seed, training steps and wall time, evaluation
metrics, and the sha256 of the weights. MAJOR changes when the action list or the observation spec
does (a compiler change), MINOR when only the weights do. A version is written into a temporary
directory and renamed into place, so an interrupted run never leaves a half-written one.

Loading checks, in order, and refuses with one line naming the file and the mismatch: metadata
readable, weights checksum, observation spec, tensor names and shapes. A version made on another
jaxlib release, or with another action list, is served: actions are matched by pass name.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xlabench.errors import UserInputError
from xlabench.files import checkout_directory, write_atomically, write_json
from xlabench.graphs import Graph, resolve_graphs
from xlabench.graphs.suite_definition import SPLITS, is_staged
from xlabench.settings import Settings, current

FORMAT = 1
WEIGHTS_FILE = "weights.safetensors"
METADATA_FILE = "metadata.json"
CHANGELOG_FILE = "CHANGELOG.md"
VERSION_PATTERN = re.compile(r"^v(\d+)\.(\d+)$")
# In a wheel, the repository's policies/ travel inside the package (a link to it in the checkout).
SHIPPED = "shipped_policies"


class PolicyError(UserInputError):
    """A policy that cannot be found, read or trusted; the message names the file."""


def policies_directory(settings: Settings | None = None) -> Path:
    """Where policies live: the settings' (default: in effect; $XLABENCH_POLICIES_DIR, --xlabench-policies),
    else the checkout's `policies/`, else (installed from a wheel) the shipped policies inside the package."""
    configured = (settings or current()).policies_directory
    if configured is not None:
        return configured
    checkout = checkout_directory()
    return checkout / "policies" if checkout is not None else Path(__file__).resolve().parents[1] / SHIPPED


def versions(name: str, root: Path | None = None) -> list[tuple[int, int]]:
    """The versions of policy `name`, oldest first."""
    directory = (root or policies_directory()) / name
    found = []
    if directory.is_dir():
        for entry in directory.iterdir():
            match = VERSION_PATTERN.match(entry.name)
            if match and entry.is_dir():
                found.append((int(match.group(1)), int(match.group(2))))
    return sorted(found)


def policy_names(root: Path | None = None) -> list[str]:
    """Every policy with at least one version."""
    base = root or policies_directory()
    if not base.is_dir():
        return []
    return sorted(entry.name for entry in base.iterdir() if entry.is_dir() and versions(entry.name, base))


def resolve(reference: str, root: Path | None = None) -> Path:
    """The version directory `reference` names: NAME (latest), NAME@vX.Y, or a path to a version."""
    path = Path(reference).expanduser()
    if (path / METADATA_FILE).exists() or (path.is_dir() and VERSION_PATTERN.match(path.name)):
        return path
    name, _, pinned = reference.partition("@")
    base = root or policies_directory()
    known = versions(name, base)
    if not known:
        shipped = ", ".join(policy_names(base)) or "none"
        raise PolicyError(f"{reference}: no such policy in {base} (policies there: {shipped})")
    if not pinned:
        major, minor = known[-1]
        return base / name / f"v{major}.{minor}"
    match = VERSION_PATTERN.match(pinned)
    if match is None or (int(match.group(1)), int(match.group(2))) not in known:
        listed = ", ".join(f"v{a}.{b}" for a, b in known)
        raise PolicyError(f"{reference}: no version {pinned} of {name} (versions: {listed})")
    return base / name / pinned


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def observation_spec(observation_space: Any) -> dict[str, list[int]]:
    """The observation `Dict`'s keys and shapes, as stored in metadata."""
    return {key: list(space.shape) for key, space in sorted(observation_space.spaces.items())}


@dataclass
class Artifact:
    """A verified policy version: where it is, its metadata and its tensors."""

    path: Path
    metadata: dict[str, Any]
    tensors: dict[str, Any]

    @property
    def label(self) -> str:
        """name@vX.Y."""
        return f"{self.metadata['name']}@{self.metadata['version']}"


def next_version(name: str, actions: list[str], spec: dict[str, list[int]], root: Path) -> str:
    """vMAJOR.MINOR for a new version: MINOR + 1 if the spaces match the latest, else MAJOR + 1."""
    known = versions(name, root)
    if not known:
        return "v1.0"
    major, minor = known[-1]
    latest = read_metadata(root / name / f"v{major}.{minor}")
    if latest.get("actions") == actions and latest.get("observation_spec") == spec:
        return f"v{major}.{minor + 1}"
    return f"v{major + 1}.0"


def check_name(name: str) -> None:
    """Refuse a policy name that is not a plain directory name."""
    if not re.fullmatch(r"[A-Za-z0-9][\w\-]*", name):
        raise PolicyError(f"{name}: a policy name is letters, digits, '-' and '_'")


def save(
    name: str,
    tensors: dict[str, Any],
    metadata: dict[str, Any],
    change: str,
    root: Path | None = None,
    files: dict[str, bytes] | None = None,
) -> Path:
    """Write a new version of policy `name`; return its directory. `change` goes into the changelog;
    `files` (name -> bytes, e.g. training_curves.png) are written beside the weights."""
    from safetensors.torch import save_file

    check_name(name)
    base = root or policies_directory()
    (base / name).mkdir(parents=True, exist_ok=True)
    version = next_version(name, metadata["actions"], metadata["observation_spec"], base)
    staging = Path(tempfile.mkdtemp(prefix=f".{version}-", dir=base / name))
    try:
        weights = staging / WEIGHTS_FILE
        save_file({key: value.detach().contiguous() for key, value in tensors.items()}, str(weights))
        complete = {
            **metadata,
            "format": FORMAT,
            "name": name,
            "version": version,
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "weights_sha256": file_sha256(weights),
        }
        write_json(staging / METADATA_FILE, complete)
        for file_name, data in (files or {}).items():
            if file_name in (WEIGHTS_FILE, METADATA_FILE) or "/" in file_name:
                raise ValueError(f"{file_name}: not a file a version may carry beside its weights")
            write_atomically(str(staging / file_name), data)
        for file in staging.iterdir():
            file.chmod(0o644)
        staging.chmod(0o755)  # mkdtemp's 0700 would hide a shipped policy from other users
        final = base / name / version
        os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    changelog = base / name / CHANGELOG_FILE
    previous = changelog.read_text() if changelog.exists() else f"# {name}\n"
    entry = f"\n## {version} ({complete['created'][:10]})\n\n{change.strip()}\n"
    write_atomically(str(changelog), (previous.rstrip("\n") + "\n" + entry).encode())
    return final


def read_metadata(path: Path) -> dict[str, Any]:
    """A version's metadata.json, or PolicyError naming the file."""
    file = path / METADATA_FILE
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        raise PolicyError(f"{file}: missing (not a policy version directory)") from None
    except (OSError, ValueError) as error:
        raise PolicyError(f"{file}: unreadable: {error}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise PolicyError(f"{file}: not a policy metadata file of format {FORMAT}")
    return data


def load(reference: str, spec: dict[str, list[int]], root: Path | None = None) -> Artifact:
    """Load and verify a policy version: its checksum, and that this xlabench's observations fit it.

    The compiler it was made with is not checked here: a policy rolls out on any supported release,
    its actions matched by pass name (`xlabench.policies.policy.ActionMatch`). `spec` is the
    observation spec this xlabench gives for the policy's own action count.
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = resolve(reference, root)
    metadata = read_metadata(path)
    weights = path / WEIGHTS_FILE
    if not weights.exists():
        raise PolicyError(f"{weights}: missing")
    digest = file_sha256(weights)
    if digest != metadata.get("weights_sha256"):
        raise PolicyError(
            f"{weights}: checksum mismatch (sha256 {digest[:12]}..., metadata.json says "
            f"{str(metadata.get('weights_sha256'))[:12]}...): the file is corrupt or was modified"
        )
    label = f"{metadata.get('name')}@{metadata.get('version')} ({path})"
    if not isinstance(metadata.get("actions"), list) or not metadata["actions"]:
        raise PolicyError(f"{label}: metadata.json lists no actions")
    if metadata.get("observation_spec") != spec:
        raise PolicyError(
            f"{label}: its network takes observations {metadata.get('observation_spec')}, this xlabench "
            f"gives {spec}; retrain it (`xlabench retrain --name {metadata.get('name')}`)"
        )
    try:
        tensors = load_file(str(weights))
    except (SafetensorError, OSError, ValueError) as error:
        raise PolicyError(f"{weights}: unreadable: {error}") from None
    return Artifact(path, metadata, tensors)


def graph_scope(metadata: dict[str, Any]) -> str:
    """The graphs a policy is judged on by default, as a SPEC: every graph for a policy trained on a
    whole split (`all`), else the families it was trained on (`train:gpt2` -> `gpt2`)."""

    trained = str(metadata.get("training", {}).get("graphs") or "all")
    if trained == "all" or trained in SPLITS:
        return "all"
    try:
        families = sorted({graph.family for graph in resolve_graphs(trained)})
    except UserInputError:
        return "all"  # trained on graphs this suite does not have: judge it everywhere
    return ",".join(families)


def gated_graphs(metadata: dict[str, Any]) -> list[Graph]:
    """The suite graphs a policy is held to by default (`graph_scope`), the staged families left out
    (`STAGED_FAMILIES`, `STAGED_GRAPHS`: no shipped version has baselines on them yet)."""
    graphs = resolve_graphs(graph_scope(metadata))
    return [graph for graph in graphs if not is_staged(graph.family, graph.name)]


def seed_statistics_line(result: dict[str, Any]) -> str:
    """One line of `retrain --seeds` statistics: the policy's and its warm start's geomean vs_default with
    95% intervals, the probability that the policy improves on its warm start, and (versions since it is
    stored) the paired judgement of the policy against its warm start."""

    def interval(part: dict[str, float]) -> str:
        return f"{part['estimate']:.4f} [{part['low']:.4f}, {part['high']:.4f}]"

    size = f"{len(result['seeds'])} seeds x {result['graphs']} graphs"
    line = f"{size}: geomean vs_default, policy {interval(result['policy']['geomean'])}"
    if "warm_start" in result:
        line += (
            f", warm start {interval(result['warm_start']['geomean'])}, "
            f"P(policy > warm start) {interval(result['probability_of_improvement'])}"
        )
    paired = result.get("policy_vs_warm_start")
    if paired and paired.get("line"):
        # A clause, not a new line: callers put this line inside sentences and the changelog entry.
        line += "; " + str(paired["line"])
    return line


def how_made(metadata: dict[str, Any]) -> str:
    """The algorithm, or "warm start only" for a version no reinforcement-learning update touched."""
    if metadata.get("warm_start") and not metadata.get("training", {}).get("steps"):
        return f"warm start only (no {metadata.get('algorithm')} update)"
    return str(metadata.get("algorithm"))


def summary_line(metadata: dict[str, Any]) -> str:
    """One line about a version: algorithm, training, and its eval geomeans."""
    training = metadata.get("training", {})
    scores = ", ".join(
        f"{split} {values['geomean_vs_default']:.4f}"
        for split, values in metadata.get("eval", {}).items()
        if values.get("geomean_vs_default") is not None
    )
    return (
        f"{metadata['name']}@{metadata['version']}: {how_made(metadata)} on "
        f"{training.get('graphs')}, {training.get('steps')} steps, "
        f"{training.get('seconds', 0) / 60:.0f} min; vs_default {scores or '-'}"
    )
