"""Stored baselines: atomic per-graph files with checksums, refused in one line when they do not fit."""

from __future__ import annotations

import dataclasses
import json

import pytest

from xlabench.baselines.baseline_records import PreviousVersion
from xlabench.baselines.baseline_store import BaselineError, load, write
from xlabench.eval.evaluation_records import EvaluationRow

STORED_ROWS = [
    {"name": "g1", "family": "f", "I": 10, "D": 8, "R": 8, "vs_default": 1.0, "runtime_ratio": 1.01,
     "sequence": ["algsimp", "cse"], "calls": 3},
    {"name": "g2", "family": "f", "I": 20, "D": 15, "R": 16, "vs_default": 0.9375, "runtime_ratio": 0.99,
     "sequence": ["cse"], "calls": 2},
    {"name": "g3", "family": "f", "I": 5, "error": "compile failed"},
]  # fmt: skip
ROWS = [EvaluationRow.from_json(row) for row in STORED_ROWS]


def with_ops(row: EvaluationRow, policy_ops: int) -> EvaluationRow:
    """The row measured with another op count."""
    return dataclasses.replace(row, policy_ops=policy_ops)


def test_written_baselines_load_back_per_graph(tmp_path):
    directory = write("general", "general@v1.0", "0.10.2", ROWS, root=tmp_path)
    assert sorted(path.name for path in directory.iterdir()) == ["g1.json", "g2.json", "metadata.json"]
    stored = load("general", "general@v1.0", "0.10.2", root=tmp_path)
    assert stored.graph_names() == ["g1", "g2"]  # the failed graph is not a baseline
    assert stored.get("g2").policy_ops == 16 and stored.get("g1").sequence == ["algsimp", "cse"]
    assert stored.get("g3") is None
    assert stored.metadata["machine"]["cores"] >= 1
    assert load("gpt2", root=tmp_path) is None


def test_a_partial_update_keeps_the_other_graphs(tmp_path):
    write("general", "general@v1.0", "0.10.2", ROWS, root=tmp_path)
    write("general", "general@v1.0", "0.10.2", [with_ops(ROWS[0], 7)], root=tmp_path)
    stored = load("general", "general@v1.0", "0.10.2", root=tmp_path)
    assert stored.get("g1").policy_ops == 7 and stored.get("g2").policy_ops == 16
    # Another policy version replaces the set as a whole.
    write("general", "general@v1.1", "0.10.2", [ROWS[1]], root=tmp_path)
    assert load("general", "general@v1.1", "0.10.2", root=tmp_path).graph_names() == ["g2"]
    assert not (tmp_path / "general" / "g1.json").exists()


def test_an_edited_graph_file_is_refused_naming_it(tmp_path):
    directory = write("general", "general@v1.0", "0.10.2", ROWS, root=tmp_path)
    record = json.loads((directory / "g1.json").read_text())
    (directory / "g1.json").write_text(json.dumps({**record, "R": 1}))
    stored = load("general", "general@v1.0", "0.10.2", root=tmp_path)
    with pytest.raises(BaselineError, match=r"g1\.json: checksum mismatch"):
        stored.get("g1")


def test_another_policy_version_or_jaxlib_is_refused_in_one_line(tmp_path):
    write("general", "general@v1.0", "0.10.2", ROWS, root=tmp_path)
    with pytest.raises(
        BaselineError, match="made with general@v1.0, the policy under test is general@v1.1"
    ) as error:
        load("general", "general@v1.1", "0.10.2", root=tmp_path)
    assert "\n" not in str(error.value)
    with pytest.raises(BaselineError, match="made with jaxlib 0.10.2, this run compiles with jaxlib 0.11.0"):
        load("general", "general@v1.0", "0.11.0", root=tmp_path)
    # Gating a jaxlib bump compares against the old jaxlib's baselines on purpose.
    assert load("general", "general@v1.0", "0.11.0", allow_jaxlib_change=True, root=tmp_path) is not None


def test_a_set_names_the_compiler_it_was_made_with(tmp_path):
    # A set made on a variant (an XLA option flipped) is that compiler's, not its jaxlib's.
    made_with = {"name": "strict", "kind": "variant", "jaxlib": "0.10.2", "base": "0.10.2",
                 "xla_flags": ["--xla_allow_excess_precision=false"], "build": "0.10.2+ab.cd~ef"}  # fmt: skip
    write("general", "general@v1.0", "strict", ROWS, root=tmp_path, compiler=made_with)
    stored = load("general", "general@v1.0", "strict", root=tmp_path)
    assert stored.metadata["compiler"] == made_with and stored.metadata["jaxlib"] == "0.10.2"
    with pytest.raises(
        BaselineError, match="made with compiler strict, this run compiles with jaxlib 0.10.2"
    ):
        load("general", "general@v1.0", "0.10.2", root=tmp_path)


def test_a_damaged_metadata_file_is_refused(tmp_path):
    (tmp_path / "general").mkdir()
    (tmp_path / "general" / "metadata.json").write_text("{not json")
    with pytest.raises(BaselineError, match=r"general/metadata\.json: unreadable"):
        load("general", root=tmp_path)


def test_a_new_version_keeps_what_the_version_before_achieved_per_graph(tmp_path):
    write("general", "general@v1.0", "0.10.2", ROWS, root=tmp_path)
    write("general", "general@v1.1", "0.10.2", [with_ops(ROWS[0], 9), ROWS[1]], root=tmp_path)
    stored = load("general", "general@v1.1", "0.10.2", root=tmp_path)
    assert stored.get("g1").previous == PreviousVersion("general@v1.0", "0.10.2", 8, 1.01)
    # Updating the same version again (part of the graphs, or on another jaxlib) keeps it.
    write("general", "general@v1.1", "0.10.2", [with_ops(ROWS[0], 8)], root=tmp_path)
    write("general", "general@v1.1", "0.11.0", [with_ops(ROWS[1], 15)], root=tmp_path)
    stored = load("general", "general@v1.1", "0.11.0", root=tmp_path)
    assert stored.get("g2").previous.policy_ops == 16 and stored.get("g2").policy_ops == 15
    # The next version is held to v1.1, not v1.0.
    write("general", "general@v1.2", "0.11.0", [ROWS[1]], root=tmp_path)
    assert load("general", root=tmp_path).get("g2").previous.policy == "general@v1.1"


def test_a_new_version_stored_split_by_split_holds_every_part_to_the_version_before(tmp_path):
    write("general", "general@v1.0", "0.10.2", ROWS, root=tmp_path)
    write("general", "general@v1.1", "0.10.2", [with_ops(ROWS[0], 9)], root=tmp_path)  # the first split
    assert load("general", root=tmp_path).graph_names() == ["g1"]  # v1.0's record of g2 is gone ...
    write("general", "general@v1.1", "0.10.2", [with_ops(ROWS[1], 17)], root=tmp_path)  # the next
    stored = load("general", "general@v1.1", "0.10.2", root=tmp_path)
    # ... but what v1.0 achieved on it waited in the metadata for the part that measures it again.
    assert stored.get("g2").previous == PreviousVersion("general@v1.0", "0.10.2", 16, 0.99)
    assert stored.get("g1").previous.policy_ops == 8
    assert "previous_versions" not in stored.metadata  # every graph measured again: nothing waits
