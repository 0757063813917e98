"""A graph set in figures: counts per family and split, instruction counts and their histogram
(`xlabench graphs list --summary`)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from xlabench.graphs.loader import Graph

# Upper bounds of the size-histogram bins (instructions); the last bin is open-ended.
HISTOGRAM_BOUNDS: tuple[int, ...] = (250, 500, 1000, 2000, 3000, 4000, 5000)


def histogram(graphs: list[Graph]) -> list[dict[str, Any]]:
    """Graph counts per instruction-count bin (`low` inclusive, `high` exclusive, None = open)."""
    lows = (0, *HISTOGRAM_BOUNDS)
    highs: tuple[int | None, ...] = (*HISTOGRAM_BOUNDS, None)
    bins = []
    for low, high in zip(lows, highs, strict=True):
        count = sum(
            1 for g in graphs if g.instruction_count >= low and (high is None or g.instruction_count < high)
        )
        bins.append({"low": low, "high": high, "count": count})
    return bins


def summary(graphs: list[Graph]) -> dict[str, Any]:
    """Counts per family and split, per split, size range and histogram."""
    per_family: dict[str, Counter[str]] = {}
    for graph in graphs:
        per_family.setdefault(graph.family, Counter())[graph.split] += 1
    sizes = [g.instruction_count for g in graphs]
    return {
        "graphs": len(graphs),
        "families": {family: dict(sorted(counts.items())) for family, counts in per_family.items()},
        "splits": dict(sorted(Counter(g.split for g in graphs).items())),
        "instructions": {"min": min(sizes), "max": max(sizes), "total": sum(sizes)},
        "histogram": histogram(graphs),
    }
