"""Finished graphs of an evaluation, kept on disk so a long run resumes where it stopped.

A search baseline over a split runs for hours on two cores (beam search: thousands of compiles a
graph). `xlabench eval --checkpoint FILE` writes every finished graph's row to FILE (whole, through a
temporary file, after each graph); run the same command again and the graphs already in FILE are
taken from it instead of being searched again. FILE also records what the rows were measured with
(strategy, its options, runtime settings, jaxlib): a checkpoint of another run is refused in one
line rather than mixed into this one. A graph is kept once its strategy has a result (R), errors found
after that included (outputs that differ are a finding, not a hiccup); a graph that failed before is
not kept, so a resumed run tries it again.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from xlabench.errors import UserInputError, differing_settings
from xlabench.eval.evaluation_records import EvaluationRow
from xlabench.files import write_json

FORMAT = "xlabench-eval-checkpoint-1"


class Checkpoint:
    """The rows of one evaluation's finished graphs, persisted after every graph."""

    def __init__(self, path: str | Path, run: dict[str, Any]) -> None:
        self.path, self.run = Path(path), run
        self.rows: dict[str, EvaluationRow] = {}
        self._lock = threading.Lock()
        if self.path.exists():
            self.rows = self._read()

    def _read(self) -> dict[str, EvaluationRow]:
        try:
            document = json.loads(self.path.read_text())
            if document.get("format") != FORMAT:
                raise ValueError
            stored_run = document["run"]
            rows = [EvaluationRow.from_json(row) for row in document["rows"]]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise UserInputError(f"{self.path}: not an xlabench eval checkpoint") from None
        if stored_run != self.run:
            raise UserInputError(
                f"{self.path}: checkpoint of another run ({differing_settings(stored_run, self.run)}); "
                "give another file or remove this one"
            )
        return {row.name: row for row in rows}

    def finished(self, name: str) -> EvaluationRow | None:
        """The stored row of graph `name`, or None if it has not finished."""
        return self.rows.get(name)

    def add(self, row: EvaluationRow) -> None:
        """Keep a finished graph's row (one with a result) and rewrite the file whole."""
        if row.policy_ops is None:
            return
        with self._lock:
            self.rows[row.name] = row
            rows = [self.rows[name].to_json() for name in sorted(self.rows)]
            write_json(self.path, {"format": FORMAT, "run": self.run, "rows": rows})
