"""Figures from metrics.json and a run directory's optional section files (ablation.json,
preferences.json) — no model, no records needed: one run's (``FIGURES``, report.html) and
several runs' (``offset_overlay``, ``gap_forest``: compare.html).

One meaning per colour in the per-phase figures (phase_accuracy, offset_accuracy,
margin_by_phase), so a reader learns it once:

* ``WORST`` (red): the run's worst phase, one per run and the same in every figure — the
  verdict's ``worst_phase``, only when the verdict found an effect (a null run has a lowest
  phase, not a worst one).
* ``OTHER`` (blue): every other phase (raw values).
* ``BOUNDARY`` (a hatch, never a colour; ``BOUNDARY_MARKER`` on dot plots): the boundary phase,
  step - 1. Being the boundary does not make a phase red; red and hatched when it is also worst.
* ``ADJUSTED`` (black dots): drift-adjusted estimates.
* ``PERIOD`` (orange): the detected period (its periodogram bar, the shaded alternate periods
  over offsets); ``NEUTRAL`` (grey): the rest (other candidate periods, connecting lines).

Accuracy axes are scaled to the data (values, intervals and a margin), not 0-1, so a gap of a
few points is visible; because a truncated axis exaggerates, the y label says which part of 0-1
is shown and a thin strip right of the axes draws the whole 0-1 with that window shaded.
Phase, offset and period ticks are integers. Every figure is saved as PNG (embedded in the
pages) and as SVG beside it (same stem, text kept as text), cropped to what is drawn so no
label is cut.
"""

from __future__ import annotations

import io
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from phasescope.analysis.pvalue import p_text
from phasescope.analysis.verdict import ALPHA
from phasescope.reporting.text import detected_worst, gap_title  # noqa: E402
from phasescope.rundir.files import atomic_write_bytes, refuse_link  # noqa: E402
from phasescope.rundir.metrics import Metrics  # noqa: E402

WORST = "tab:red"
OTHER = "tab:blue"
BOUNDARY = "///"  # a hatch pattern
BOUNDARY_MARKER = "s"  # dots have no room for a hatch
ADJUSTED = "black"
PERIOD = "tab:orange"
NEUTRAL = "tab:gray"


def worst_phase(metrics: Metrics) -> tuple[int | None, str]:
    """The phase drawn ``WORST`` and what it is worst in (for the legend): the verdict's rule, as
    in the tables (a null run has a lowest phase, not a worst one)."""
    worst = detected_worst(metrics)
    basis = f"{metrics.verdict.phase_basis or ''} {metrics.verdict.outcome or 'accuracy'}".strip()
    return (worst, basis) if worst is not None else (None, "")


def phase_accuracy(metrics: Metrics, path: Path, title: str = "") -> None:
    """Raw accuracy per phase (bars, 95% intervals clustered by content when there are enough
    contents; dots when the axis does not start at 0, where a bar's length would misstate it) and
    the drift-adjusted accuracy (dots, with the phase effect's interval)."""
    rows = [r for r in metrics.phases if r.accuracy is not None]
    phases = [r.phase for r in rows]
    acc = np.array([r.accuracy for r in rows])
    err = _raw_errors(rows, acc)
    adjusted = [r for r in rows if r.adjusted_accuracy is not None]
    y, y_err = _adjusted(adjusted) if adjusted else (None, None)
    spans = ([_span(acc, err)] if rows else []) + ([_span(y, y_err)] if adjusted else [])
    low, high = (min(s[0] for s in spans), max(s[1] for s in spans)) if spans else (0.0, 1.0)
    dots = _unit_window(low, high)[0] > 0  # the axis is cut above 0: bars would exaggerate differences
    fig, ax = plt.subplots(figsize=(5.2, 3.9))
    label = "raw, 95% CI by content" if err is not None else "raw (no interval: too few contents)"
    handles = _phase_bars(ax, metrics, phases, acc, err, label + ("; dots: axis cut above 0" if dots else ""), dots)
    if adjusted:
        x = np.array([r.phase for r in adjusted]) + 0.25
        label = "drift-adjusted, phase effect's 95% CI"
        handles.append(ax.errorbar(x, y, yerr=y_err, fmt="o", color=ADJUSTED, capsize=3, label=label))
    ax.set_xlabel("phase of the anchor ((position - align) mod step)")
    ax.set_ylabel("accuracy")
    if spans:
        _fit_unit_axis(ax, low, high)
    _legend(ax, handles)
    ax.set_title(title or gap_title(metrics), fontsize=9)
    _save(fig, path)


def _raw_errors(rows: list[dict], acc: np.ndarray) -> np.ndarray | None:
    if not rows or any(r.ci_low is None for r in rows):
        return None
    low = np.clip(acc - np.array([r.ci_low for r in rows]), 0, None)  # float rounding at 0% / 100%
    high = np.clip(np.array([r.ci_high for r in rows]) - acc, 0, None)
    return np.array([low, high])


def _adjusted(rows: list[dict]) -> tuple[np.ndarray, np.ndarray | None]:
    """Drift-adjusted accuracy and its error bars: the phase effect's interval (pp) around it."""
    y = np.array([r.adjusted_accuracy for r in rows])
    if any(r.effect_ci_pp is None for r in rows):
        return y, None
    effect = np.array([r.effect_pp for r in rows])
    ci = np.array([r.effect_ci_pp for r in rows])
    # clip: an interval need not contain the point estimate, and errorbar refuses negative lengths
    return y, np.clip(np.array([effect - ci[:, 0], ci[:, 1] - effect]) / 100, 0, None)


def offset_accuracy(metrics: Metrics, path: Path) -> None:
    offsets = metrics.offsets
    acc = np.array([np.nan if a is None else a for a in metrics.accuracy_by_offset], dtype=float)
    period = metrics.period.detected
    fig, ax = plt.subplots(figsize=(5.4, 4.4))
    if period:
        for start in range(min(offsets), max(offsets) + 1, 2 * period):
            ax.axvspan(start - 0.5, start + period - 0.5, color=PERIOD, alpha=0.12)
    ax.plot(offsets, acc, "-", color=NEUTRAL, alpha=0.6)
    band = _offset_band(metrics)
    if band is not None:  # how far these contents' mean at one offset could move with other contents
        ax.fill_between(offsets, band[0], band[1], color=NEUTRAL, alpha=0.15, linewidth=0, label="95% over contents")
    phases = metrics.phase_by_offset or [None] * len(offsets)
    for label, color, marker, at in _offset_groups(metrics, phases):
        ax.plot(np.array(offsets)[at], acc[at], marker, color=color, label=label)
    _legend(ax, ax.get_legend_handles_labels()[0])
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("offset d")
    ax.set_ylabel("accuracy")
    if np.isfinite(acc).any():
        shown = acc if band is None else np.concatenate([acc, band[0], band[1]])
        _fit_unit_axis(ax, float(np.nanmin(shown)), float(np.nanmax(shown)))
    label = f"detected period {period}" if period else "no significant period"
    if period and metrics.period.kind == "other":
        label = f"a period-{period} pattern, not the step"
    ax.set_title(f"accuracy over offsets ({label}; shaded: alternate periods)", fontsize=9)
    _read_me(ax, READ_OFFSETS.format(n=metrics.n_contents), 95)
    _save(fig, path)


def _offset_band(metrics: Metrics) -> tuple[np.ndarray, np.ndarray] | None:
    """[2][D] the per-offset intervals clustered by content (None: not computed, or too few contents)."""
    ci = metrics.accuracy_ci_by_offset
    if not ci or all(low is None for low, _ in ci):
        return None
    low = np.array([np.nan if lo is None else lo for lo, _ in ci], dtype=float)
    high = np.array([np.nan if hi is None else hi for _, hi in ci], dtype=float)
    return low, high


# how to read a figure that seems to disagree with the verdict (one line under each)
READ_OFFSETS = (
    "How to read: the mean of these {n} contents at each offset, with its 95% interval over contents (grey band). "
    "The period and gap tests ask whether contents in "
    "general differ by phase, with each content's answers as one unit: a clean wave drawn by few contents, or by "
    "contents that each prefer their own phase, can test as no period (see 'phase dependence per content')."
)
READ_PERIODOGRAM = (
    "How to read: each bar is the evidence that accuracy repeats every P offsets once the drift is removed, "
    "-log10 of its p-value with every period tried counted (solid: the step, its divisors and other periods, "
    "tested together; hatched: multiples of the step, a pattern beyond the step's phases). A bar above the dashed "
    "line is significant at alpha = 0.05; the verdict then shares alpha with its other tests, and the title says "
    "what it claims."
)
ALPHA_LINE = ALPHA  # the verdict's alpha: the line a periodogram bar crosses when its test rejects


def _read_me(ax, text: str, width: int) -> None:
    """``text`` under the x label (under the legend when it sits below the axes), left-aligned with
    the axes (the tight crop keeps it)."""
    legend = ax.get_legend()
    above = legend if legend is not None and legend.get_bbox_to_anchor().y0 < ax.bbox.y0 else ax.xaxis.label
    ax.annotate(
        textwrap.fill(text, width),
        (0, 0),
        xycoords=("axes fraction", above),
        xytext=(0, -4),
        textcoords="offset points",
        va="top",
        fontsize=7,
        color="#444444",
    )


def _offset_groups(metrics: Metrics, phases: list) -> list[tuple[str, str, str, np.ndarray]]:
    """(legend label, colour, marker, mask over offsets) of the worst phase, the boundary phase
    and the others: the colours and marks of phase_accuracy's bars."""
    worst, basis = worst_phase(metrics)
    boundary = metrics.step - 1
    phases = np.array([-1 if p is None else p for p in phases])  # -1: an offset with no single phase
    worst_marker = BOUNDARY_MARKER if worst == boundary else "o"
    others = "other phases" if (phases >= 0).any() else "accuracy"
    groups = [
        (f"worst phase {worst} ({basis})", WORST, worst_marker, phases == worst),
        (f"boundary phase {boundary}", OTHER, BOUNDARY_MARKER, (phases == boundary) & (phases != worst)),
        (others, OTHER, "o", (phases != worst) & (phases != boundary)),
    ]
    return [group for group in groups if group[3].any()]


def periodogram(metrics: Metrics, path: Path) -> None:
    """Every period the test considered, as -log10 of the p-value it was tested with; the verdict's
    claimed period in orange, its title the verdict's claim."""
    period = metrics.period
    tested = {int(p): v for p, v in (period.candidate_p or {}).items()}
    multiples = {int(p): v for p, v in (period.multiple_ps or {}).items()}
    fig, ax = plt.subplots(figsize=(5, 3.4))
    if not tested and not multiples:  # nothing to draw: say why instead of empty axes
        ax.set_axis_off()
        why = period.note or "no candidate period could be tested"
        if period.explained and period.p_value is not None:
            why = "these metrics predate the per-period p-values: run `phasescope analyze` on the run again"
        ax.text(0.5, 0.5, textwrap.fill(f"periodogram not drawn: {why}", 60), ha="center", va="center", fontsize=8)
        _save(fig, path)
        return
    claimed = metrics.verdict.period if metrics.verdict else None
    floor = 1 / (1 + (metrics.n_resamples or 999))  # a bootstrap p-value never goes below this
    periods = sorted({*tested, *multiples})
    where = {p: i for i, p in enumerate(periods)}  # one slot per period: 8 and 12 sit beside 6
    for group, hatch in ((tested, None), (multiples, "//")):
        shown = sorted(group)
        heights = [-np.log10(max(group[p], floor)) for p in shown]
        colors = [PERIOD if p == claimed else NEUTRAL for p in shown]
        ax.bar([where[p] for p in shown], heights, color=colors, hatch=hatch, edgecolor="white" if hatch else None)
    ax.axhline(-np.log10(ALPHA_LINE), color="black", linestyle="--", linewidth=0.8)
    ax.text(1.0, -np.log10(ALPHA_LINE), f" alpha\n {ALPHA_LINE:g}", transform=ax.get_yaxis_transform(),
            va="center", ha="left", fontsize=7)  # fmt: skip
    ax.set_xticks(range(len(periods)), [str(p) for p in periods])
    ax.set_xlabel("period P (hatched: multiples of the step)")
    ax.set_ylabel("evidence, -log10 p\n(every period tried counted)")
    ax.set_ylim(0, max(-np.log10(floor), -np.log10(ALPHA_LINE)) * 1.08)
    ax.set_title(_period_title(metrics, claimed), fontsize=9)
    untestable = sorted(int(p) for p in (period.untestable or {}))
    left_out = f" Not testable here: P = {', '.join(map(str, untestable))}." if untestable else ""
    _read_me(ax, READ_PERIODOGRAM + left_out, 75)
    _save(fig, path)


def _period_title(metrics: Metrics, claimed: int | None) -> str:
    """The verdict's claim about the period, with the p-value it was claimed at."""
    adjusted = (metrics.verdict.adjusted_p if metrics.verdict else None) or {}
    if claimed is None:
        raw, held = metrics.period.p_value, adjusted.get("period")
        if raw is not None and raw < ALPHA_LINE and held is not None:  # the test alone passes, the family not
            return (
                f"no period claimed: period test {p_text(raw)},\n{p_text(held)} sharing alpha with the verdict's tests"
            )
        return "no period claimed"
    kind = "multiple" if metrics.period.kind == "multiple" and claimed == metrics.period.detected else "period"
    p = adjusted.get(kind)
    return f"period {claimed} claimed" + (f" ({p_text(p)}, Holm)" if p is not None else "")


def margin_by_phase(metrics: Metrics, path: Path) -> None:
    """Per-phase log score: the mean margin (or log p of the right answer, when the records name
    no other candidate) with its 95% interval by content; without ``log_score`` (nothing to
    compare with) the bare mean margins."""
    score = metrics.log_score
    if score:
        rows = [(r.phase, r.mean, r.ci) for r in score.phases if r.mean is not None]
        outcome = score.outcome
    else:
        rows = [(r.phase, r.mean_margin, None) for r in metrics.phases if r.mean_margin is not None]
        outcome = "margin"
    fig, ax = plt.subplots(figsize=(5.2, 3.7))
    if not rows:  # no record carries a log-prob (answers read as text only): say so, not an empty axis
        ax.set_axis_off()
        ax.text(0.5, 0.5, "log-prob margin not drawn: no record carries log-probs", ha="center", fontsize=8)
        _save(fig, path)
        return
    means = np.array([mean for _, mean, _ in rows])
    err = None if any(ci is None for *_, ci in rows) else _interval_errors(means, [ci for *_, ci in rows])
    label = "mean, 95% CI by content" if err is not None else "mean (no interval)"
    handles = _phase_bars(ax, metrics, [phase for phase, *_ in rows], means, err, label)
    if outcome == "margin":
        ax.axhline(0, color="black", lw=0.8)  # above 0: the right answer is ahead of every other candidate
        ax.set_ylabel("mean margin (nats)")
        ax.set_title("log-prob margin per phase: log p(right) - max log p(other)", fontsize=9)
    else:
        ax.set_ylabel("mean log p (nats)")
        ax.set_title("log-prob of the right answer per phase", fontsize=9)
    ax.set_xlabel("phase")
    _legend(ax, handles)
    _save(fig, path)


def _interval_errors(center: np.ndarray, ci: list) -> np.ndarray:
    ci = np.array(ci, dtype=float)
    return np.clip(np.array([center - ci[:, 0], ci[:, 1] - center]), 0, None)


def _phase_bars(ax, metrics: Metrics, phases: list[int], values, err, label: str, dots: bool = False) -> list:
    """Bars per phase in the module's colours (``WORST``, ``OTHER``, ``BOUNDARY`` hatch), integer
    phase ticks; ``dots``: squares instead of bars (an axis that does not start at 0), the
    boundary phase's square outlined. Returns the legend handles."""
    worst, basis = worst_phase(metrics)
    boundary = metrics.step - 1
    colors = [WORST if p == worst else OTHER for p in phases]
    if dots:
        for i, (phase, color) in enumerate(zip(phases, colors, strict=True)):
            yerr = None if err is None else err[:, i : i + 1]
            edge = "black" if phase == boundary else color
            ax.errorbar([phase], [values[i]], yerr=yerr, fmt="s", color=color, mec=edge, mew=1.5, ms=8, capsize=4)
    else:
        bars = ax.bar(phases, values, yerr=err, color=colors, alpha=0.6, capsize=4)
        for bar, phase in zip(bars, phases, strict=True):
            if phase == boundary:
                bar.set_hatch(BOUNDARY)
                bar.set_edgecolor("black")
    ax.set_xticks(phases)

    def handle(color, text):
        return (
            Line2D([], [], marker="s", ls="", color=color, ms=8, label=text)
            if dots
            else Patch(color=color, alpha=0.6, label=text)
        )

    handles = [handle(OTHER, label)]
    if worst in phases:
        handles.append(handle(WORST, f"worst phase {worst} ({basis})"))
    if boundary in phases:
        mark = "outlined" if dots else "hatched"
        hatch = None if dots else BOUNDARY
        handles.append(
            Patch(facecolor="none", edgecolor="black", hatch=hatch, label=f"boundary phase {boundary} ({mark})")
        )
    return handles


def _span(values: np.ndarray, err: np.ndarray | None) -> tuple[float, float]:
    """The lowest and highest point drawn: values and the ends of their error bars."""
    low, high = (values, values) if err is None else (values - err[0], values + err[1])
    return float(np.min(low)), float(np.max(high))


def _fit_unit_axis(ax, low: float, high: float) -> None:
    """A 0-1 y axis scaled to [low, high] plus a margin; where the window is not all of 0-1 the
    label names it and a strip right of the axes draws 0-1 with the window shaded."""
    bottom, top = _unit_window(low, high)
    ax.set_ylim(bottom, top)
    ax.yaxis.set_major_locator(UnitTicks())  # the margin never shows as accuracy 1.02 or -0.02
    shown = max(bottom, 0.0), min(top, 1.0)
    if shown == (0.0, 1.0):
        return
    ax.set_ylabel(f"{ax.get_ylabel()} (axis {shown[0]:.2f}–{shown[1]:.2f} of 0–1)")
    strip = ax.inset_axes([1.02, 0, 0.025, 1])
    strip.set_ylim(0, 1)
    strip.axhspan(*shown, color=NEUTRAL, alpha=0.6)
    strip.set_xticks([])
    strip.set_yticks([0, 0.5, 1], ["0", ".5", "1"], fontsize=7)
    strip.yaxis.tick_right()
    strip.yaxis.set_label_position("right")
    strip.set_ylabel("shown part of 0–1", fontsize=7)


def _unit_window(low: float, high: float) -> tuple[float, float]:
    """The y limits of a 0-1 axis showing [low, high] with a margin (a bar or cap at 0 or 1 stays
    off the frame)."""
    pad = max(0.15 * (high - low), 0.02)
    bottom, top = max(low - pad, -0.02), min(high + pad, 1.02)
    if top - bottom < MIN_WINDOW:  # a floor (or ceiling) run: its points on the axis's edge, not mid-air at 0
        if low < 0.5:
            top = min(bottom + MIN_WINDOW, 1.02)
        else:
            bottom = max(top - MIN_WINDOW, -0.02)
    return bottom, top


MIN_WINDOW = 0.2  # the narrowest accuracy axis: a flat run at 0 reads as "at the floor", not as a mid-axis line


class UnitTicks(MaxNLocator):
    """Ticks of an accuracy axis: matplotlib's choice, without any outside 0-1."""

    def tick_values(self, vmin, vmax):
        ticks = super().tick_values(vmin, vmax)
        return ticks[(ticks >= -1e-9) & (ticks <= 1 + 1e-9)]


def _legend(ax, handles: list) -> None:
    """Below the axes (a data-scaled axis has no empty corner), so the figure stays as narrow as
    its axes and scales down to a phone's width with nothing off-screen (#59 item 4)."""
    if handles:
        ax.legend(handles=handles, fontsize=7, loc="upper center", frameon=False, ncol=min(2, len(handles)),
                  **_below_axes(ax))  # fmt: skip


def _below_axes(ax, points: float = 30) -> dict:
    """``legend`` arguments that put it ``points`` under the axes' bottom, below the tick labels
    and the x label whatever the axes' height (an axes fraction moved with it)."""
    from matplotlib.transforms import offset_copy

    return {"bbox_to_anchor": (0.5, 0), "bbox_transform": offset_copy(ax.transAxes, fig=ax.figure, y=-points,
                                                                       units="points")}  # fmt: skip


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
    fig, axes = plt.subplots(panels, 1, figsize=(5.4, 3.6 * panels), squeeze=False)  # stacked: a phone's width
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
        ax2 = axes[1][0]
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


PHASE_MARKERS = "osD^vP*Xph"  # the needle's phase at each offset, one shape per phase (at most 10 told apart)


def offset_overlay(curves: dict[str, tuple], path: Path) -> None:
    """Accuracy over offsets of several runs in one figure (``phasescope compare``): label ->
    (offsets, accuracy at each[, the needle's phase at each]). Each point's shape is its phase, so
    a dip is read against the runs' own phases (offset 2 is phase 2 in one run, 1 in another)."""
    fig, ax = plt.subplots(figsize=(5.4, 3.9))
    phases_seen: set[int] = set()
    for i, (label, (offsets, accuracy, *rest)) in enumerate(curves.items()):
        color = f"C{i % 10}"
        ax.plot(offsets, accuracy, "-", lw=1, color=color, label=label)
        phases = rest[0] if rest else [None] * len(offsets)
        for x, y, phase in zip(offsets, accuracy, phases, strict=True):
            marker = "o" if phase is None else PHASE_MARKERS[phase % len(PHASE_MARKERS)]
            ax.plot([x], [y], marker, ms=4, color=color)
            phases_seen |= set() if phase is None else {phase}
    for phase in sorted(phases_seen):
        ax.plot([], [], PHASE_MARKERS[phase % len(PHASE_MARKERS)], ms=4, color="black", label=f"phase {phase}")
    ax.set_xlabel("offset d")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.03, 1.05)
    # below: the curves fill the axes, and a legend beside them widened the figure past a phone's screen
    ax.legend(fontsize=7, loc="upper center", frameon=False, ncol=2, **_below_axes(ax))
    ax.set_title("accuracy over offsets, all runs (marker: the needle's phase)", fontsize=9)
    _save(fig, path)


def gap_forest(rows: list[tuple[str, float | None, list[float] | None]], path: Path, of: str = "run") -> None:
    """Drift-adjusted phase gap of each run with its 95% interval, one row per run, first run on
    top (``phasescope compare``): (label, gap pp or None, [low, high] or None: a bare dot). ``of``:
    what a row is (a run; a length band or a task of one run's report)."""
    fig, ax = plt.subplots(figsize=(5.4, 1.2 + 0.45 * len(rows)))
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
    ax.set_title(f"phase gap per {of}", fontsize=9)
    _save(fig, path)


def _save(fig, path: Path, dpi: int = 100) -> None:
    """PNG for the pages, SVG beside it (same stem) for print and zoom; both cropped to what is
    drawn (bbox_inches="tight") so labels, legends and captions outside the axes are never cut."""
    refuse_link(path.parent)  # RUN/figures as a link would send the figures elsewhere
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    save_atomic(fig, path, dpi=dpi, bbox_inches="tight")
    # text kept as text (searchable, readable in the file); fixed ids and no date: same figure, same bytes
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "phasescope"}):
        save_atomic(fig, path.with_suffix(".svg"), bbox_inches="tight", metadata={"Date": None})
    plt.close(fig)


def save_atomic(fig, path: Path, **options) -> None:
    """A figure drawn in memory and written at once (``rundir.files.atomic_write_bytes``): a full disk
    leaves no half PNG, and a link in the run directory redirects nothing."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format=path.suffix.lstrip("."), **options)
    atomic_write_bytes(path, buffer.getvalue())


FIGURES = {
    "phase_accuracy.png": phase_accuracy,
    "offset_accuracy.png": offset_accuracy,
    "periodogram.png": periodogram,
    "margin_by_phase.png": margin_by_phase,
}
