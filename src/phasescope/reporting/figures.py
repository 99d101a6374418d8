"""Figures from metrics.json and a run directory's optional section files (ablation.json,
preferences.json) — no model, no records needed: one run's (``FIGURES``, report.html) and
several runs' (``offset_overlay``, ``gap_forest``: compare.html)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from phasescope.reporting.text import gap_title  # noqa: E402


def phase_accuracy(metrics: dict, path: Path, title: str = "") -> None:
    """Raw accuracy per phase (bars, 95% intervals clustered by content when there are enough
    contents) and the drift-adjusted accuracy (dots, with the phase effect's interval)."""
    rows = [r for r in metrics["phases"] if r["accuracy"] is not None]
    phases = np.array([r["phase"] for r in rows])
    acc = np.array([r["accuracy"] for r in rows])
    err = None
    if rows and all(r["ci_low"] is not None for r in rows):
        low = np.clip(acc - np.array([r["ci_low"] for r in rows]), 0, None)  # float rounding at 0% / 100%
        high = np.clip(np.array([r["ci_high"] for r in rows]) - acc, 0, None)
        err = [low, high]
    fig, ax = plt.subplots(figsize=(5, 3.4))
    colors = ["tab:red" if p == metrics["step"] - 1 else "tab:blue" for p in phases]
    label = "raw (95% CI by content)" if err is not None else "raw (no interval: too few contents)"
    ax.bar(phases, acc, yerr=err, color=colors, capsize=4, alpha=0.6, label=label)
    adjusted = [r for r in rows if r["adjusted_accuracy"] is not None]
    if adjusted:
        x = np.array([r["phase"] for r in adjusted]) + 0.25
        y = np.array([r["adjusted_accuracy"] for r in adjusted])
        err = None
        if all(r["effect_ci_pp"] is not None for r in adjusted):
            effect = np.array([r["effect_pp"] for r in adjusted])
            ci = np.array([r["effect_ci_pp"] for r in adjusted])
            err = [(effect - ci[:, 0]) / 100, (ci[:, 1] - effect) / 100]
        ax.errorbar(x, y, yerr=err, fmt="o", color="black", capsize=3, label="drift-adjusted")
    ax.set_xticks(phases, [f"{p}{' (boundary)' if p == metrics['step'] - 1 else ''}" for p in phases], fontsize=8)
    ax.set_xlabel("phase of the anchor ((position - align) mod step)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title or gap_title(metrics), fontsize=9)
    _save(fig, path)


def offset_accuracy(metrics: dict, path: Path) -> None:
    offsets, acc = metrics["offsets"], metrics["accuracy_by_offset"]
    period = metrics["period"]["detected"]
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    if period:
        for start in range(min(offsets), max(offsets) + 1, 2 * period):
            ax.axvspan(start - 0.5, start + period - 0.5, color="tab:orange", alpha=0.12)
    ax.plot(offsets, acc, "-", color="tab:blue", alpha=0.6)
    phases = metrics.get("phase_by_offset") or [None] * len(offsets)
    colors = plt.get_cmap("tab10")
    for phase in sorted({p for p in phases if p is not None}):
        at = [i for i, p in enumerate(phases) if p == phase]
        boundary = " (boundary)" if phase == metrics["step"] - 1 else ""
        ax.plot(
            [offsets[i] for i in at], [acc[i] for i in at], "o", color=colors(phase), label=f"phase {phase}{boundary}"
        )
    if any(p is not None for p in phases):
        ax.legend(fontsize=7, ncol=4, loc="lower right")
    else:
        ax.plot(offsets, acc, "o", color="tab:blue")
    ax.set_xlabel("offset d")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1.05)
    label = f"detected period {period}" if period else "no significant period"
    if period and metrics["period"].get("kind") == "other":
        label = f"a period-{period} pattern, not the step"
    ax.set_title(f"accuracy over offsets ({label}; shaded: alternate periods)", fontsize=9)
    _save(fig, path)


def periodogram(metrics: dict, path: Path) -> None:
    explained = metrics["period"].get("explained") or {}
    periods = [int(p) for p in explained]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    colors = ["tab:orange" if p == metrics["period"]["detected"] else "tab:gray" for p in periods]
    ax.bar(periods, list(explained.values()), color=colors)
    ax.set_xlabel("candidate period P")
    ax.set_ylabel("detrended variance explained by d mod P")
    p_value = metrics["period"].get("p_value")
    ax.set_title(f"periodogram (permutation p = {p_value:.2g})" if p_value is not None else "periodogram", fontsize=9)
    _save(fig, path)


def margin_by_phase(metrics: dict, path: Path) -> None:
    rows = [r for r in metrics["phases"] if r.get("mean_margin") is not None]
    fig, ax = plt.subplots(figsize=(5, 3.2))
    ax.bar([r["phase"] for r in rows], [r["mean_margin"] for r in rows], color="tab:green", alpha=0.8)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("phase")
    ax.set_ylabel("mean log p(right) - max log p(wrong)")
    ax.set_title("log-prob margin per phase", fontsize=9)
    _save(fig, path)


def ablation_heatmap(ablation: dict, path: Path) -> None:
    """Head x phase accuracy change when the head is removed (pp, ablated - unablated), diverging
    colours centred at 0; cells without data are grey and say "n/e" (not estimable)."""
    heads = ablation["heads"]
    phases = sorted({c["phase"] for h in heads for c in h["accuracy"]["change_by_phase"]})
    values = np.full((len(heads), len(phases)), np.nan)
    for i, h in enumerate(heads):
        for c in h["accuracy"]["change_by_phase"]:
            if c.get("mean") is not None:
                values[i, phases.index(c["phase"])] = 100 * c["mean"]
    finite = values[np.isfinite(values)]
    vmax = max(float(np.abs(finite).max()) if finite.size else 0.0, 1.0)
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(phases), 1.2 + 0.32 * len(heads)))
    cmap = plt.get_cmap("RdBu").with_extremes(bad="0.8")  # grey: not estimable
    image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=-vmax, vmax=vmax, aspect="auto")
    size = 8 if len(heads) <= 24 else 6
    for (i, j), v in np.ndenumerate(values):
        text = "n/e" if np.isnan(v) else f"{v:+.1f}"
        dark = np.isfinite(v) and abs(v) > 0.6 * vmax
        ax.text(j, i, text, ha="center", va="center", fontsize=size, color="white" if dark else "black")
    step = ablation.get("step")
    ax.set_xticks(range(len(phases)), [f"{p}{' (boundary)' if p == (step or 0) - 1 else ''}" for p in phases])
    ax.set_yticks(range(len(heads)), [f"L{h['layer']}H{h['head']}" for h in heads], fontsize=size)
    ax.set_xlabel("phase")
    fig.colorbar(image, ax=ax, label="accuracy change (pp)")
    ax.set_title("accuracy change when the head is removed", fontsize=9)
    _save(fig, path)


def preference_weights(prefs: dict, path: Path, comparison: dict | None = None) -> None:
    """Effective weight per slot for each layer/head (error bars: bootstrap 95% over rows);
    with ``comparison`` (inspect.preferences.compare_with_run), per-phase accuracy beside the
    mean weight per phase."""
    panels = 2 if comparison else 1
    fig, axes = plt.subplots(1, panels, figsize=(5.5 * panels, 3.6), squeeze=False)
    ax = axes[0][0]
    series = [
        (layer, h) for layer in prefs["layers"] if layer["effective"] for h in range(len(layer["effective"]["mean"]))
    ]
    width = 0.8 / max(1, len(series))
    for i, (layer, h) in enumerate(series):
        eff = layer["effective"]
        mean = np.array(eff["mean"][h])
        err = np.abs(np.array([eff["ci_low"][h], eff["ci_high"][h]]) - mean)
        x = np.arange(len(mean)) + (i - (len(series) - 1) / 2) * width
        ax.bar(x, mean, width, yerr=err, capsize=2, label=f"layer {layer['layer']} head {h}")
    if series:
        w = series[0][0]["window"]
        ax.axhline(1 / w, color="gray", lw=0.8, ls="--", label=f"uniform 1/{w}")
        ax.set_xticks(range(w), [f"{k}\n(ph {p})" for k, p in enumerate(series[0][0]["slot_phase"])])
    ax.set_xlabel("window slot (0 = oldest) and its phase")
    ax.set_ylabel("effective pooling weight")
    ax.set_title("learned position preferences")
    ax.legend(fontsize=7)
    if comparison:
        ax2 = axes[0][1]
        ax2.plot(comparison["phases"], comparison["accuracy"], "o-", color="C3", label="accuracy (run)")
        ax2.set_xlabel("phase")
        ax2.set_ylabel("accuracy", color="C3")
        twin = ax2.twinx()
        twin.plot(comparison["phases"], comparison["weight"], "s--", color="C0", label="mean weight")
        twin.set_ylabel("mean effective weight", color="C0")
        rho = comparison["rho"]
        ax2.set_title(
            f"Spearman rho = {'n/a' if rho is None else f'{rho:.2f}'} "
            f"({len(comparison['phases'])} points, descriptive only)"
        )
        ax2.set_xticks(comparison["phases"])
    _save(fig, path, dpi=120)


def offset_overlay(curves: dict[str, tuple[list[int], list[float]]], path: Path) -> None:
    """Accuracy over offsets of several runs in one figure (``phasescope compare``): label ->
    (offsets, accuracy at each)."""
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for label, (offsets, accuracy) in curves.items():
        ax.plot(offsets, accuracy, "o-", ms=3, lw=1, label=label)
    ax.set_xlabel("offset d")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.03, 1.05)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # outside: the curves fill the axes
    ax.set_title("accuracy over offsets, all runs", fontsize=9)
    _save(fig, path)


def gap_forest(rows: list[tuple[str, float | None, list[float] | None]], path: Path) -> None:
    """Drift-adjusted phase gap of each run with its 95% interval, one row per run, first run on
    top (``phasescope compare``): (label, gap pp or None, [low, high] or None: a bare dot)."""
    fig, ax = plt.subplots(figsize=(6.5, 1.2 + 0.45 * len(rows)))
    ys = list(range(len(rows)))[::-1]
    for y, (_, gap, ci) in zip(ys, rows, strict=True):
        if gap is None:
            ax.text(0, y, " withheld (see the run's note)", va="center", fontsize=8, color="gray")
            continue
        # clip: an interval need not contain the point estimate, and errorbar refuses negative lengths
        err = None if ci is None else [[max(gap - ci[0], 0)], [max(ci[1] - gap, 0)]]
        ax.errorbar([gap], [y], xerr=err, fmt="o", color="black", capsize=4)
    ax.axvline(0, color="gray", lw=0.8, ls="--")  # an interval that reaches 0 shows no clear phase effect
    ax.set_yticks(ys, [label for label, _, _ in rows], fontsize=8)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.set_xlabel("drift-adjusted phase gap (pp), 95% interval")
    ax.set_title("phase gap per run", fontsize=9)
    _save(fig, path)


def _save(fig, path: Path, dpi: int = 110) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


FIGURES = {
    "phase_accuracy.png": phase_accuracy,
    "offset_accuracy.png": offset_accuracy,
    "periodogram.png": periodogram,
    "margin_by_phase.png": margin_by_phase,
}
