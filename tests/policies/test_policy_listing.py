"""The stored policies as `xlabench policies list` reads them: the latest version of each, every version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xlabench.policies.artifact import PolicyError
from xlabench.policies.policy_listing import every_version, stored_policies

SHIPPED = Path(__file__).resolve().parents[2] / "policies"


def version(root: Path, name: str, label: str) -> dict:
    """A version directory with only its metadata (what listing reads)."""
    metadata = {"format": 1, "name": name, "version": label}
    (root / name / label).mkdir(parents=True)
    (root / name / label / "metadata.json").write_text(json.dumps(metadata))
    return metadata


def test_each_policy_is_listed_with_its_latest_version_and_every_version_oldest_first(tmp_path):
    first, latest = version(tmp_path, "tiny", "v1.0"), version(tmp_path, "tiny", "v1.10")
    other = version(tmp_path, "alpha", "v2.0")
    (tmp_path / "empty").mkdir()  # a directory without versions is no policy
    alpha, tiny = stored_policies(tmp_path)
    assert (alpha.name, alpha.versions, alpha.latest) == ("alpha", ((2, 0),), other)
    assert (tiny.name, tiny.versions, tiny.latest) == ("tiny", ((1, 0), (1, 10)), latest)  # 10 after 9
    assert every_version(tmp_path) == [other, first, latest]
    assert stored_policies(tmp_path / "nowhere") == [] and every_version(tmp_path / "nowhere") == []
    (tmp_path / "tiny" / "v1.10" / "metadata.json").write_text("{")
    with pytest.raises(PolicyError, match=r"v1\.10/metadata\.json: unreadable"):
        stored_policies(tmp_path)


def test_the_shipped_policies_are_listed_as_stored():
    [general] = [policy for policy in stored_policies(SHIPPED) if policy.name == "general"]
    assert general.latest["version"] == "v{}.{}".format(*general.versions[-1])
    labels = [f"{document['name']}@{document['version']}" for document in every_version(SHIPPED)]
    assert [label for label in labels if label.startswith("general@")] == [
        "general@v{}.{}".format(*pair) for pair in general.versions
    ]
