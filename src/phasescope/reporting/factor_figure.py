"""The effect by each factor's phase (issue #59 item 1): one panel per factor test the design made
(the needle's, the prompt end's, the distance's phase; ``metrics.factors``), its effect per
residue at the period the test named, with the effect's 95% interval. A stack whose verdict reads
"prompt length ≡ 3 mod 4: −100 pp" gets a figure that shows it, where the figures by the needle's
phase stay flat. The factor the verdict claims is drawn first, its worst residue in ``WORST``;
a factor not claimed is drawn in ``OTHER`` only (its lowest residue is not a worst one).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from phasescope.analysis.pvalue import p_text
from phasescope.phases import FACTORS
from phasescope.reporting.figures import NEUTRAL, OTHER, WORST, _interval_errors, _save
from phasescope.rundir.metrics import Metrics

FIGURE = "factor_effects.png"
GRID_FIGURE = "needle_by_end.png"


def factor_tests(metrics: Metrics) -> list[dict]:
    """The factor tests with effects per residue, the claimed ones first (the verdict's order)."""
    tests = [t for t in (metrics.factors or {}).get("tests", []) if _drawable(t)]
    claimed = set(metrics.verdict.claims)
    return sorted(tests, key=lambda t: f"factor:{t['name']}" not in claimed)


def _drawable(test: dict) -> bool:
    rows = test.get("phases") or []
    return bool(rows) and all(row.get("effect_pp") is not None for row in rows)


def factor_effects(metrics: Metrics, path: Path) -> bool:
    """Draw the panels into ``path``; False (nothing written) when the run has no factor tests."""
    tests = factor_tests(metrics)
    if not tests:
        return False
    claimed = set(metrics.verdict.claims)
    columns = min(2, len(tests))  # two panels a row: three side by side were 1,100 px wide
    rows = -(-len(tests) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(2.7 * columns + 0.5, 2.9 * rows), squeeze=False, sharey=True)
    align = (metrics.factors or {}).get("align", 0)
    for ax, test in zip(axes.flat, tests, strict=False):
        _panel(ax, test, metrics.step, f"factor:{test['name']}" in claimed, align)
    for ax in list(axes.flat)[len(tests) :]:
        ax.set_axis_off()
    for row in axes:
        row[0].set_ylabel("effect (pp) vs the mean\nof all residues", fontsize=8)
    fig.suptitle("the effect by each factor's phase\n(claimed factor first; bars: 95% CI)", fontsize=9)
    _save(fig, path)
    return True


def _panel(ax, test: dict, step: int, claimed: bool, align: int) -> None:
    rows = test["phases"]
    residues = [row["phase"] for row in rows]
    effect = np.array([row["effect_pp"] for row in rows])
    ci = [row.get("effect_ci_pp") for row in rows]
    err = _interval_errors(effect, ci) if all(c is not None for c in ci) else None
    colors = [WORST if claimed and r == test.get("worst_phase") else OTHER for r in residues]
    ax.bar(residues, effect, yerr=err, color=colors, alpha=0.6, capsize=3)
    ax.axhline(0, color=NEUTRAL, lw=0.8)
    if claimed and test.get("worst_phase") in residues:  # the verdict's number, named as the verdict names it
        i = residues.index(test["worst_phase"])
        versus = effect[i] * len(effect) / (len(effect) - 1)  # effects sum to 0: worst minus the others' mean
        ax.annotate(f"{versus:+.1f} pp vs\nthe other phases", (residues[i], effect[i]), fontsize=7,
                    ha="center", va="top" if effect[i] > 0 else "bottom", xytext=(0, -4 if effect[i] > 0 else 4),
                    textcoords="offset points")  # fmt: skip
    ax.set_xticks(residues)
    members = test.get("members") or []  # several: factors this design moves together
    period = test.get("period") or step
    what = " or ".join(FACTORS[m].short for m in members) if members else test["name"]
    if members == ["end"]:  # the prompt end's residues said as prompt lengths, as the verdict says them
        ax.set_xticks(residues, [str((r + align) % period) for r in residues])
        ax.set_xlabel(f"prompt length mod {period}", fontsize=8)
    else:
        ax.set_xlabel(f"{what} phase mod {period}", fontsize=8)
    between = ", between contents" if test.get("kind") == "between" else ""
    status = "claimed" if claimed else "not claimed"
    p = test.get("p_value")  # raw, as the verdict's sentence gives it; "claimed" is after the adjustment
    ax.set_title(f"{what}{between}: {status}" + (f" ({p_text(p)})" if p is not None else ""), fontsize=8)


def needle_end_heatmap(metrics: Metrics, path: Path) -> bool:
    """Accuracy in each (needle phase, prompt length mod step) cell of a design that moves the two
    apart (``factors.grid``), each cell labelled with its accuracy and records; False (nothing
    written) when the run has no such grid. A row that is low everywhere is the needle's phase, a
    column the prompt end's, a diagonal the distance's."""
    grid = (metrics.factors or {}).get("grid")
    if not grid:
        return False
    accuracy = np.array([[np.nan if a is None else a for a in row] for row in grid["accuracy"]])
    title = "accuracy by needle phase x prompt end\n(raw; each cell: accuracy, records)"
    _cell_heatmap(100 * accuracy, np.array(grid["n"]), (metrics.factors or {}).get("align", 0), title,
                  "accuracy (%)", "viridis", path)  # fmt: skip
    return True


def departures_heatmap(paired: dict, path: Path) -> bool:
    """A paired comparison's departures (B wrong where A is right) per (needle phase, prompt length
    mod step) cell, as a share of the cell's records; False when the records do not say where the
    prompt ends. A column lit up is a fault keyed on the prompt's length, a row on the needle's phase."""
    cells = paired.get("cells") or []
    if not cells or any(c.get("end_phase") is None for c in cells):
        return False
    step = int(paired["step"])
    departed, n = np.zeros((step, step)), np.zeros((step, step), dtype=int)
    for c in cells:  # a cell per (needle, end) phase, or several (length bands): summed
        i, j = int(c["needle_phase"]) % step, int(c["end_phase"]) % step
        n[i, j] += int(c["n"])
        departed[i, j] += c["b_wrong_a_right"]
    rate = np.where(n > 0, departed / np.maximum(n, 1), np.nan)
    a, b = paired["names"]
    title = f"{b} wrong where {a} is right, by needle phase x prompt end\n(each cell: share of records, records)"
    _cell_heatmap(100 * rate, n, int(paired.get("align") or 0), title, "departures (%)", "Reds", path, low=0.0)
    return True


def _cell_heatmap(values, counts, align: int, title: str, label: str, cmap: str, path: Path, low=None) -> None:
    """[step, step] values (rows: needle phase; columns: prompt length mod step), each cell labelled
    with its value and records."""
    step = len(values)
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * step, 0.8 + 0.6 * step))
    image = ax.imshow(values, cmap=cmap, aspect="auto", vmin=low)
    middle = np.nanmean(values) if np.isfinite(values).any() else 0.0
    dark_high = cmap != "viridis"  # viridis is dark at its low end, the sequential maps at their high end
    for i in range(step):
        for j in range(step):
            if np.isfinite(values[i, j]):
                dark = values[i, j] > middle if dark_high else values[i, j] < middle
                ax.text(j, i, f"{values[i, j]:.0f}%\n{counts[i][j]}", ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")  # fmt: skip
    ax.set_xticks(range(step), [str((m + align) % step) for m in range(step)])
    ax.set_yticks(range(step))
    ax.set_xlabel(f"prompt length mod {step}", fontsize=8)
    ax.set_ylabel("needle phase", fontsize=8)
    ax.set_title(title, fontsize=8)
    fig.colorbar(image, ax=ax, label=label, fraction=0.05)
    _save(fig, path)
