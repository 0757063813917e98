"""The evaluation as files: a Markdown table and a PNG plot of vs_default per graph, by family."""

from __future__ import annotations

import os

from xlabench.eval.evaluation_records import (
    BELOW,
    LEFT_UNOPTIMIZED,
    EvaluationRow,
    Summary,
    figure,
    worst_text,
)
from xlabench.files import png_bytes, write_atomically


def markdown(title: str, rows: list[EvaluationRow], summary: Summary) -> str:
    """Summary per family, then one line per graph."""
    lines = [f"# {title}", "", "| family | graphs | geomean vs_default | geomean reduction | geomean runtime "
             "| worst graph | compiler calls |", "|---|---|---|---|---|---|---|"]  # fmt: skip
    for family, part in [*summary.families.items(), ("**all**", summary)]:
        lines.append(
            f"| {family} | {part.graphs} | {figure(part.geomean_vs_default)} | "
            f"{figure(part.geomean_reduction_ratio)} | {figure(part.geomean_runtime_ratio, 3)} | "
            f"{worst_text(part.worst)} | {part.calls} |"
        )
    lines += [
        "",
        "| graph | I | D | R | vs_default | reduction | runtime | calls | sequence |",
        "|---" * 9 + "|",
    ]
    for row in rows:
        if row.vs_default is None:
            lines.append(f"| {row.name} | failed: {row.error or ''} |||||||")
            continue
        sequence = " ".join(row.sequence or [])
        runtime = figure(row.runtime_ratio, 3)
        if row.error is not None:
            runtime = "outputs differ" if row.outputs_differ is not None else "not run"
        lines.append(
            f"| {row.name} | {row.input_ops} | {row.default_ops} | {row.policy_ops} | {row.vs_default:.4f} | "
            f"{figure(row.reduction_ratio, 3)} | {runtime} | {row.calls} | {sequence} |"
        )
    lines += [
        "",
        f"Graphs below {BELOW}: {summary.below}; left unoptimized (R = I where XLA's default removes "
        f"more than {LEFT_UNOPTIMIZED:.0%}): {summary.left_unoptimized}.",
    ]
    depths = sorted(row.search_depth for row in rows if row.search_depth is not None)
    if depths:
        median = (
            depths[len(depths) // 2]
            if len(depths) % 2
            else (depths[len(depths) // 2 - 1] + depths[len(depths) // 2]) / 2
        )
        lines += [
            "",
            f"Depth the search reached within its budget: median {median}, {depths[0]} to {depths[-1]} "
            f"over {len(depths)} graphs (passes in its deepest level).",
        ]
    counted = [row for row in rows if row.measured]
    differ = [row for row in counted if row.outputs_differ is not None]
    if differ:
        lines += [
            "",
            "Outputs that differ from XLA's default executable's (same inputs, dtype tolerance; low "
            "precision: error against the module lifted to f32, worse than the default's):",
            "",
        ]
        lines += [f"- {row.name}: {row.error}" for row in differ]
    unexecuted = [row for row in counted if row.not_executed]
    if unexecuted:
        lines += ["", "Counted, but an executable could not be built or run:", ""]
        lines += [f"- {row.name}: {row.error}" for row in unexecuted]
    return "\n".join(lines) + "\n"


def plot(title: str, rows: list[EvaluationRow]) -> bytes:
    """PNG: one bar per graph (vs_default), grouped and coloured by family, a line at XLA's default."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    measured = sorted((row for row in rows if row.measured), key=lambda row: (row.family, row.name))
    families = sorted({row.family for row in measured})
    colours = {family: plt.get_cmap("tab10")(index % 10) for index, family in enumerate(families)}
    figure, axes = plt.subplots(figsize=(max(6.0, 0.18 * len(measured) + 2), 4.0))
    values = [row.vs_default or 0.0 for row in measured]
    # Bars start at XLA's default (1.0), so small gains and losses stay visible.
    axes.bar(range(len(measured)), [value - 1.0 for value in values], bottom=1.0,
             color=[colours[row.family] for row in measured])  # fmt: skip
    spread = max([abs(value - 1.0) for value in values] + [0.01])
    axes.set_ylim(1.0 - 1.2 * spread, 1.0 + 1.2 * spread)
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.set_ylabel("vs_default = D / R  (above 1: fewer ops than XLA)")
    axes.set_title(title)
    axes.set_xticks([])
    # Legend entries as patches: an empty bar container draws its legend swatch in the default colour.
    handles = [Patch(color=colours[family], label=family) for family in families]
    axes.legend(handles=handles, fontsize="small", ncol=min(5, len(families)) or 1)
    return png_bytes(figure, dpi=120)


def write_report(directory: str, title: str, rows: list[EvaluationRow], summary: Summary) -> list[str]:
    """Write report.md and vs_default.png into `directory` (each atomically); return their paths."""
    os.makedirs(directory, exist_ok=True)
    table, picture = os.path.join(directory, "report.md"), os.path.join(directory, "vs_default.png")
    write_atomically(table, markdown(title, rows, summary).encode())
    write_atomically(picture, plot(title, rows))
    return [table, picture]
