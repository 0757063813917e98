"""The finished seeds of a `retrain` run, kept on disk so that an interrupted run goes on where it stopped.

Three seeds of A2C outlast a session on 2 cores; a stop loses every seed trained so far. With
`--checkpoint DIR`, each seed's run goes to DIR as soon as it is trained: its network's weights before
and after RL as safetensors (tensors only: loading runs no pickled code, and each file's sha256 is
checked), the rest of `TrainingRun` as JSON, written last, so a seed counts only once all its files are
complete. The same command later trains only the seeds DIR lacks. DIR remembers the settings that make a
seed's run what it is (algorithm, graphs, steps, environment, hyperparameters, warm start and its
expert, validation, environment processes, package versions, compiler release): a run with other
settings is refused in one line rather than mixing seeds of two configurations. Training is
deterministic on one machine only: resume where the seeds were trained. A seed's scores on the selection
graphs (`--select-on`, an hour of rollouts for five seeds) are kept too, by the selection they were
measured on, so a run stopped while it selects keeps the seeds it has judged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xlabench.agents.algorithm_config import AlgorithmConfig
from xlabench.agents.train import TrainingRun
from xlabench.env.environment_config import EnvironmentConfig
from xlabench.errors import UserInputError, differing_settings
from xlabench.files import json_bytes, write_atomically

SETTINGS_FILE = "settings.json"
FORMAT = 1


@dataclass
class SeedCheckpoint:
    """A directory of finished seeds, all trained with `settings` (a JSON document)."""

    directory: Path
    settings: dict[str, Any]

    def open(self) -> list[int]:
        """Check that the directory holds seeds of these settings (or start it); the seeds it holds."""
        path = self.directory / SETTINGS_FILE
        if self.directory.exists() and not self.directory.is_dir():
            raise UserInputError(f"checkpoint {self.directory}: a file, not a directory")
        if not path.exists():
            if self.directory.exists() and any(self.directory.iterdir()):
                raise UserInputError(
                    f"checkpoint {self.directory}: a directory that is not a retrain checkpoint (no "
                    f"{SETTINGS_FILE}); give a new or empty one"
                )
            write_atomically(path, json_bytes({"format": FORMAT, "settings": self.settings}, sort_keys=True))
            return []
        stored = _read_json(path).get("settings")
        if not isinstance(stored, dict):
            raise UserInputError(f"checkpoint {path}: holds no settings")
        if stored != self.settings:
            raise UserInputError(
                f"checkpoint {self.directory}: made with other settings "
                f"({differing_settings(stored, self.settings)}); rerun with its settings, or remove it"
            )
        seeds = []
        for record in self.directory.glob("seed-*.json"):
            if record.name.endswith(".scores.json"):
                continue
            seed = record.stem.removeprefix("seed-")
            if not seed.isdigit():
                raise UserInputError(f"checkpoint {record}: not a seed's record (seed-N.json)")
            seeds.append(int(seed))
        return sorted(seeds)

    def save(self, run: TrainingRun) -> None:
        """Keep a finished seed's run: weights first, then the record that names their checksums."""
        from safetensors.torch import save

        record = {
            "format": FORMAT,
            "seed": run.seed,
            "algorithm": run.algorithm,
            "actions": run.actions,
            "steps": run.steps,
            "episodes": run.episodes,
            "seconds": run.seconds,
            "graphs": run.graphs,
            "ppo_graphs": run.ppo_graphs,
            "environments": run.environments,
            "warm_start": run.warm_start,
            "curve": run.curve,
            "validation_curve": run.validation_curve,
            "weights_sha256": {},
        }
        for which, tensors in (("policy", run.weights), ("warm_start", run.warm_start_tensors)):
            if tensors is None:
                continue
            data = save({key: value.detach().contiguous() for key, value in tensors.items()})
            write_atomically(self.directory / f"seed-{run.seed}.{which}.safetensors", data)
            record["weights_sha256"][which] = hashlib.sha256(data).hexdigest()
        write_atomically(self.directory / f"seed-{run.seed}.json", json_bytes(record))

    def load(
        self, seed: int, hyperparameters: AlgorithmConfig, environment: EnvironmentConfig
    ) -> TrainingRun | None:
        """A finished seed's run (no model: its weights), or None when the directory does not hold it."""
        from safetensors import SafetensorError
        from safetensors.torch import load

        path = self.directory / f"seed-{seed}.json"
        if not path.exists():
            return None
        record = _read_json(path)
        try:
            tensors: dict[str, Any] = {}
            for which, checksum in record["weights_sha256"].items():
                weights = self.directory / f"seed-{seed}.{which}.safetensors"
                data = weights.read_bytes() if weights.exists() else b""
                if hashlib.sha256(data).hexdigest() != checksum:
                    raise UserInputError(f"checkpoint {weights}: missing, or not the file it was (checksum)")
                tensors[which] = load(data)
            # hyperparameters and environment are those of the settings `open` checked.
            return TrainingRun(
                model=None,
                algorithm=record["algorithm"],
                hyperparameters=hyperparameters,
                environment=environment,
                actions=list(record["actions"]),
                steps=int(record["steps"]),
                episodes=int(record["episodes"]),
                seconds=float(record["seconds"]),
                seed=int(record["seed"]),
                graphs=record["graphs"],
                environments=int(record["environments"]),
                warm_start=record["warm_start"],
                warm_start_tensors=tensors.get("warm_start"),
                curve=[(step, value) for step, value in record["curve"]],
                validation_curve=[(step, value) for step, value in record["validation_curve"]],
                weights=tensors["policy"],
                ppo_graphs=list(record.get("ppo_graphs", [])),
            )
        except (KeyError, TypeError, ValueError, AttributeError, SafetensorError) as error:
            raise UserInputError(f"checkpoint {path}: not a complete seed record ({error!r})") from None

    def save_scores(self, seed: int, selected_on: str, scores: dict[str, Any]) -> None:
        """Keep a seed's scores on the selection graphs `selected_on` (`SeedScores.to_json`)."""
        record = {"format": FORMAT, "seed": seed, "selected_on": selected_on, "scores": scores}
        write_atomically(self.directory / f"seed-{seed}.scores.json", json_bytes(record))

    def load_scores(self, seed: int, selected_on: str) -> dict[str, Any] | None:
        """A seed's kept scores on `selected_on`, or None when none are kept for that selection."""
        path = self.directory / f"seed-{seed}.scores.json"
        if not path.exists():
            return None
        record = _read_json(path)
        if record.get("selected_on") != selected_on or not isinstance(record.get("scores"), dict):
            return None
        return record["scores"]

    def remove(self) -> None:
        """Delete the checkpoint's own files, and the directory if that leaves it empty."""
        for path in [self.directory / SETTINGS_FILE, *self.directory.glob("seed-*")]:
            path.unlink(missing_ok=True)
        with contextlib.suppress(OSError):  # not empty: something else is in it, and stays
            self.directory.rmdir()


def _read_json(path: Path) -> dict[str, Any]:
    """A checkpoint file's JSON object; one clear error when it is not one."""
    try:
        document = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserInputError(f"checkpoint {path}: not readable JSON ({error})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise UserInputError(f"checkpoint {path}: not a retrain checkpoint of format {FORMAT}")
    return document
