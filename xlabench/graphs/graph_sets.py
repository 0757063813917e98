"""On-disk format of a graph set: gzip-compressed HLO text files plus `manifest.json`.

Both are written byte-for-byte reproducibly (gzip header without timestamp or file name, JSON with sorted
keys) and atomically (temp file in the same directory, then `os.replace`), so an interrupted build never
leaves a truncated file or manifest behind.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path
from typing import Any

from xlabench.errors import UserInputError
from xlabench.files import write_json

DATA_DIR: Path = Path(__file__).resolve().parent / "data"
# Graph sets beside the suite, never trained or selected on: real modules written by others, stored
# byte for byte with their sources (`foreign/SOURCES.md`), and small cases of what such modules carry.
CORPORA: dict[str, Path] = {
    "foreign": Path(__file__).resolve().parent / "foreign",
    "synthetic": Path(__file__).resolve().parent / "synthetic",
}
MANIFEST_NAME = "manifest.json"
GRAPH_SUFFIX = ".hlo.gz"
MANIFEST_FORMAT = 1


def text_sha256(text: str) -> str:
    """sha256 hex digest of HLO text as UTF-8: the manifest's identity of a graph."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def compress_hlo(text: str) -> bytes:
    """Gzip HLO text reproducibly (mtime 0, no file name in the header)."""
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def read_hlo(path: Path) -> str:
    """Read an HLO text file, decompressing it when its name ends in `.gz`."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise UserInputError(f"cannot read HLO file {path}: {error.strerror}") from error
    if path.name.endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as error:
            raise UserInputError(f"{path} is not a valid gzip file: {error}") from error
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise UserInputError(f"{path} is not UTF-8 HLO text") from error


def read_manifest(directory: Path) -> dict[str, Any]:
    """Load `manifest.json` from a graph directory."""
    path = directory / MANIFEST_NAME
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as error:
        raise UserInputError(f"no graph manifest at {path}; run `xlabench graphs build`") from error
    except (OSError, ValueError) as error:
        raise UserInputError(f"cannot read graph manifest {path}: {error}") from error
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise UserInputError(f"{path} is not a format-{MANIFEST_FORMAT} xlabench graph manifest")
    return manifest


def write_manifest(directory: Path, entries: list[dict[str, Any]]) -> None:
    """Write the manifest for `entries` (sorted by name) atomically."""
    manifest = {"format": MANIFEST_FORMAT, "graphs": sorted(entries, key=lambda entry: entry["name"])}
    write_json(directory / MANIFEST_NAME, manifest, sort_keys=True)
