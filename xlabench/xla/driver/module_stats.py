"""What `xlabench stats` shows of one module: its features, what XLA's default pipeline leaves of it, and
how long a full compile takes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xlabench.xla.driver.features import Features
from xlabench.xla.driver.hlo_module import HloModule
from xlabench.xla.driver.pass_driver import PassDriver, default_driver


@dataclass(frozen=True)
class ModuleStats:
    """One module measured: where it came from, its features, D and a full compile's wall time."""

    source: str
    name: str
    fingerprint: str
    features: Features
    default_op_count: int  # D: after XLA's default pipeline, counted before layout assignment
    full_compile_seconds: float

    def to_json(self) -> dict[str, Any]:
        """The `xlabench stats --json` object (docs/reference.md)."""
        return {
            "graph": self.source,
            "name": self.name,
            "fingerprint": self.fingerprint,
            "op_count": self.features.op_count,
            "histogram": self.features.histogram,
            "cost": self.features.to_dict()["cost"],
            "default_op_count": self.default_op_count,
            "full_compile_seconds": self.full_compile_seconds,
        }


def module_stats(module: HloModule, driver: PassDriver | None = None) -> ModuleStats:
    """Measure a module with `driver` (default: the process's): features, D, a full compile's time."""
    driver = driver or default_driver()
    return ModuleStats(
        source=module.source,
        name=module.name,
        fingerprint=module.fingerprint,
        features=driver.features(module),
        default_op_count=driver.features(driver.run_default_pipeline(module)).op_count,
        full_compile_seconds=driver.full_compile_seconds(module),
    )
