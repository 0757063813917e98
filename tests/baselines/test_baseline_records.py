"""A stored baseline as records: every file in the repository reads and writes back the same bytes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from xlabench.baselines.baseline_records import BaselineEntry, PreviousVersion
from xlabench.eval.evaluation_records import EvaluationRow
from xlabench.files import json_bytes

ROOT = Path(__file__).resolve().parents[2]
METADATA = sorted((ROOT / "baselines").glob("*/metadata.json"))


def test_the_repository_holds_baselines_to_check():
    assert METADATA


@pytest.mark.parametrize("metadata", METADATA, ids=lambda path: path.parent.name)
def test_every_stored_baseline_reads_and_writes_back_byte_identically(metadata):
    graphs = json.loads(metadata.read_text())["graphs"]
    for name, entry in graphs.items():
        stored = (metadata.parent / f"{name}.json").read_bytes()
        record = BaselineEntry.from_json(json.loads(stored))
        assert record.name == name and record.policy_ops == entry["R"]
        written = json_bytes(record.to_json(), sort_keys=True)
        assert written == stored and hashlib.sha256(written).hexdigest() == entry["sha256"]


def test_an_older_entry_without_optional_keys_loads_and_keeps_what_the_version_before_did():
    entry = BaselineEntry.from_json({"name": "g", "R": 8, "sequence": ["cse"]})
    assert entry.policy_ops == 8 and entry.runtime_ratios is None and entry.previous is None
    previous = {"policy": "general@v1.0", "jaxlib": "0.10.2", "R": 9, "runtime_ratio": 1.01}
    entry = BaselineEntry.from_json({"name": "g", "R": 8, "previous": previous})
    assert entry.previous == PreviousVersion("general@v1.0", "0.10.2", 9, 1.01)
    assert entry.to_json()["previous"] == previous


def test_an_entry_keeps_the_fields_a_baseline_keeps_of_a_row():
    row = EvaluationRow("g", "f", 10, 8, 8, ["cse"], 3, seconds=1.0, vs_default=1.0, runtime_ratio=1.1)
    assert BaselineEntry.from_row(row).to_json() == {
        "name": "g", "family": "f", "I": 10, "D": 8, "R": 8, "vs_default": 1.0, "runtime_ratio": 1.1,
        "runtime_ratios": None, "sequence": ["cse"], "calls": 3,
    }  # fmt: skip
