"""What a stored baseline keeps of a graph (`BaselineEntry`) and of the policy version before
(`PreviousVersion`); JSON is only how they are stored, with the short keys the files have always used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xlabench.eval.evaluation_records import EvaluationRow


@dataclass(frozen=True)
class PreviousVersion:
    """What the policy version before achieved on a graph, kept so the gate can hold the new one to it.

    JSON keys: `R` = `policy_ops`; `policy`, `jaxlib`, `runtime_ratio` as named.
    """

    policy: str
    jaxlib: str | None
    policy_ops: int
    runtime_ratio: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The `previous` object of a baseline file."""
        return {
            "policy": self.policy,
            "jaxlib": self.jaxlib,
            "R": self.policy_ops,
            "runtime_ratio": self.runtime_ratio,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> PreviousVersion:
        """A `previous` object as any version stored it."""
        return cls(
            policy=document["policy"],
            jaxlib=document.get("jaxlib"),
            policy_ops=document["R"],
            runtime_ratio=document.get("runtime_ratio"),
        )


@dataclass(frozen=True)
class BaselineEntry:
    """One graph's stored baseline (`baselines/<policy>/<graph>.json`): what the policy achieved on it.

    JSON keys (as in an evaluation row): `I` = `input_ops`, `D` = `default_ops`, `R` = `policy_ops`;
    every other key is the attribute's name. `runtime_ratio` is the median of `runtime_ratios`, one per
    measurement. Every key but `previous` is written, None or not; a key a file lacks reads as None.
    """

    name: str
    family: str | None = None
    input_ops: int | None = None
    default_ops: int | None = None
    policy_ops: int | None = None
    vs_default: float | None = None
    runtime_ratio: float | None = None
    runtime_ratios: list[float] | None = None
    sequence: list[str] | None = None
    calls: int | None = None
    previous: PreviousVersion | None = None

    @classmethod
    def from_row(cls, row: EvaluationRow, previous: PreviousVersion | None = None) -> BaselineEntry:
        """The fields a baseline keeps of an evaluation row."""
        return cls(
            name=row.name,
            family=row.family,
            input_ops=row.input_ops,
            default_ops=row.default_ops,
            policy_ops=row.policy_ops,
            vs_default=row.vs_default,
            runtime_ratio=row.runtime_ratio,
            runtime_ratios=row.runtime_ratios,
            sequence=row.sequence,
            calls=row.calls,
            previous=previous,
        )

    def to_json(self) -> dict[str, Any]:
        """The baseline file's object (written with sorted keys)."""
        document = {
            "name": self.name,
            "family": self.family,
            "I": self.input_ops,
            "D": self.default_ops,
            "R": self.policy_ops,
            "vs_default": self.vs_default,
            "runtime_ratio": self.runtime_ratio,
            "runtime_ratios": self.runtime_ratios,
            "sequence": self.sequence,
            "calls": self.calls,
        }
        if self.previous is not None:
            document["previous"] = self.previous.to_json()
        return document

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> BaselineEntry:
        """A baseline file's object as any version stored it."""
        previous = document.get("previous")
        return cls(
            name=document["name"],
            family=document.get("family"),
            input_ops=document.get("I"),
            default_ops=document.get("D"),
            policy_ops=document.get("R"),
            vs_default=document.get("vs_default"),
            runtime_ratio=document.get("runtime_ratio"),
            runtime_ratios=document.get("runtime_ratios"),
            sequence=document.get("sequence"),
            calls=document.get("calls"),
            previous=None if previous is None else PreviousVersion.from_json(previous),
        )
