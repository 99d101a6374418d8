"""Statistics on sweep records only (docs/design.md, 'Statistics'): never imports a model or a backend.

``analyze_records`` puts together: per-phase raw accuracy with intervals clustered by content;
the column effects within contents (``offset_effects``, stage 1) and everything fitted on them
with one data-chosen, checked drift trend (``trend``): phase effects, the gap and homogeneity
(``phase_effects``), the period over offsets (``period``); the phase dependence of each content
(``dependence``); same-window vs split-window at equal value phase (``windows``); the mean
probability of each candidate per phase (``candidates``); the same phase statistics in the
log-prob margin (``log_score``: what a run at the ceiling can still show); and the ``verdict``,
one plain reading of all of it. A statistic without data is ``None``
("not estimable"), never a NaN; a p-value the design cannot support is withheld, and the note
says why.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from phasescope.analysis.candidates import candidate_probabilities
from phasescope.analysis.dependence import phase_dependence
from phasescope.analysis.factors import factor_phases, factor_statistics, layout
from phasescope.analysis.intervals import cluster_proportion, wilson
from phasescope.analysis.log_score import log_score
from phasescope.analysis.offset_effects import MIN_CONTENTS, OffsetEffects, fit_offset_effects
from phasescope.analysis.period import detect_period, residues
from phasescope.analysis.phase_effects import PhaseEffects, fit_phase_effects
from phasescope.analysis.pvalue import p_text
from phasescope.analysis.records import RecordArrays, bands_of
from phasescope.analysis.trend import select_trend
from phasescope.analysis.verdict import verdict
from phasescope.analysis.windows import window_contrast
from phasescope.phases import longest_period
from phasescope.rundir.records import as_records

MODEL = (
    "linear probability model in two stages: accuracy at each offset within contents (content fixed effects), "
    "then a Legendre trend over offsets (degree chosen by the data: the smallest whose next terms add nothing, "
    "checked) + phase effects; wild cluster bootstrap by content (Webb weights), CR1-studentized; gap interval "
    "from simultaneous intervals of all pairwise phase contrasts, gap bias-corrected"
)
ACCURACY_INTERVAL = (
    "95% interval clustered by content: Wilson's interval with the effective sample size (records / design "
    "effect) and Student's t over contents; none below 10 contents"
)

__all__ = ["analyze_arrays", "analyze_records", "wilson"]


def _mean(x: np.ndarray) -> float | None:
    x = x[~np.isnan(x)]
    return float(x.mean()) if len(x) else None


def per_phase(r: RecordArrays, fx: PhaseEffects) -> list[dict]:
    overall = float(r.correct.mean())
    rows = []
    for p in range(r.step):
        mask = r.phase == p
        y = r.correct[mask]
        right = np.bincount(r.content[mask], weights=y, minlength=r.n_contents)
        total = np.bincount(r.content[mask], minlength=r.n_contents)
        low, high = cluster_proportion(right, total, min_units=MIN_CONTENTS)
        row = {
            "phase": p,
            "n": int(len(y)),
            "n_contents": int((total > 0).sum()),
            "accuracy": float(y.mean()) if len(y) else None,
            "ci_low": low,
            "ci_high": high,
            "mean_logprob": _mean(r.logprob[mask]),
            "mean_margin": _mean(r.margin[mask]),
            "adjusted_accuracy": None,
            "effect_pp": None,
            "effect_ci_pp": None,
        }
        if fx.effects is not None and p in fx.phases:
            i = fx.phases.index(p)
            row["adjusted_accuracy"] = overall + float(fx.effects[i])
            row["effect_pp"] = 100 * float(fx.effects[i])
            if fx.effect_ci is not None:
                row["effect_ci_pp"] = [100 * float(v) for v in fx.effect_ci[i]]
        rows.append(row)
    return rows


def _ceiling_note(r: RecordArrays) -> str | None:
    """Why accuracy has no test at the ceiling (floor). It says accuracy, not 'no effect could show':
    the log-prob margin may still show one there, and the verdict then reads it (``log_score``)."""
    if r.correct.min() != r.correct.max():
        return None
    bound, word, task = ("ceiling", "right", "a harder task (longer contexts, more pairs)")
    if not r.correct[0]:
        task = "an easier task (shorter contexts, fewer pairs) or a model that can do it"
        bound, word = "floor", "wrong"
    scored = bool(np.isfinite(r.logprob).any())
    instead = "the log-prob score is read instead" if scored else f"compare mean log p per phase, or use {task}"
    return f"every record is {word}: at this {bound} accuracy cannot show a phase effect; {instead}"


def _join(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None


def _record_drift(r: RecordArrays, fx: OffsetEffects | None, effects: PhaseEffects) -> np.ndarray | None:
    """[N] the fitted common drift at each record's column (None when it could not be fitted)."""
    if fx is None or effects.drift is None:
        return None
    # the columns are sorted by (offset, phase): code each pair as one integer and look it up
    span = int(max(fx.phase.max(), r.phase.max())) + 1
    columns = fx.offset.astype(np.int64) * span + fx.phase
    wanted = r.offset.astype(np.int64) * span + r.phase
    index = np.minimum(np.searchsorted(columns, wanted), len(columns) - 1)
    if (columns[index] != wanted).any():
        raise KeyError("a record's (offset, phase) is not among the fitted columns")
    return effects.drift[index]


def _gap_caveat(period: dict) -> str | None:
    if period.get("kind") != "other":
        return None
    return f"the offsets show {period['note']}"


def _moving_phase(r: RecordArrays, shape: dict | None) -> tuple[RecordArrays, str]:
    """The records with ``phase`` the phase their design moves: the needle's, or the prompt end's when
    the needle is held within every content and the end moves (``--design shift-end``). ``shape``:
    the records' ``factors.layout`` (None: they do not say where the prompt ends)."""
    moving = [f for group in (shape or {}).get("groups", []) for f in group]
    if "needle" not in moving and "end" in moving:
        return replace(r, phase=r.end_phase.copy(), end_phase=r.phase.copy()), "end"
    return r, "needle"


def named_period(period: dict, v: dict) -> dict:
    """The period test's result as the verdict reads it, so metrics.json, ``analyze``'s period line,
    ``compare`` and the figures give one answer (issue #56: the verdict said "period 4", the next
    line "detected period 8", metrics.json that period 8 could not be told from the drift): the
    period named is the one the verdict claims after its Holm adjustment, or none; a multiple of
    the step that the multiples' test covered with a trend of its own is not listed as untestable."""
    if not period:
        return period
    out = dict(period)
    tried = set(period.get("multiples_tried") or [])
    out["untestable"] = {p: why for p, why in (period.get("untestable") or {}).items() if int(p) not in tried}
    if "multiple" in v["claims"]:
        return out  # the multiple's result stands: detected, kind "multiple", its note
    if "period" in v["claims"] and period.get("base_detected"):
        note = period.get("note") if period.get("kind") != "multiple" else None
        return out | {"detected": period["base_detected"], "kind": period.get("base_kind"), "note": note}
    why = None
    if period.get("p_value") is not None:
        why = "no period is claimed once the verdict's tests share alpha (Holm)"
        if period.get("multiple_test_p") is not None:
            why += f"; the multiples of the step tried gave {p_text(period['multiple_test_p'])}"
    return out | {
        "detected": None,
        "kind": None,
        "note": why if period.get("p_value") is not None else period.get("note"),
    }


def _passed(effects: PhaseEffects, degree: int | None, fx: OffsetEffects | None, step: int) -> int | None:
    """The trend's degree for the factor tests only when it passed its checks. A trend that failed
    them next to the step's phases (the phase effects withheld) is not passed on (issue #56: 5 of
    215 withheld null sweeps claimed a factor); the factor tests read residues up to the longest
    candidate period, so a trend checked next to those residues serves them instead (a needle effect
    every 8 tokens fails the step-4 trend's checks, and withholding every factor test there cost
    half the sweeps that found it)."""
    withheld = effects.gap_plugin is None and effects.note is not None and "withheld" in effects.note
    if not withheld:
        return degree
    longest = longest_period(step)
    residue = None if fx is None or longest == step else residues(fx, longest, step)
    if residue is None or isinstance(residue, str):
        return None
    choice = select_trend(fx, residue, f"residue mod {longest}")
    return choice.degree if choice.degree is not None and choice.checked else None


def fixed_contents(r: RecordArrays) -> dict:
    """Contents whose every record is wrong (right): whatever fails does not move with the design."""
    right = np.bincount(r.content, weights=r.correct, minlength=r.n_contents)
    total = np.bincount(r.content, minlength=r.n_contents)
    seen = total > 0
    return {
        "n_contents": int(seen.sum()),
        "always_wrong": int((seen & (right == 0)).sum()),
        "always_right": int((seen & (right == total)).sum()),
    }


def analyze_records(
    records: list[dict], seed: int = 0, n_resamples: int = 2000, trend_degree: int | None = None
) -> dict:
    """metrics.json content from records alone."""
    records = as_records(records)  # checked once: from_records takes Records as they are
    r = RecordArrays.from_records(records)
    return analyze_arrays(r, seed, n_resamples, trend_degree, bands=bands_of(records))


def analyze_arrays(
    r: RecordArrays,
    seed: int = 0,
    n_resamples: int = 2000,
    trend_degree: int | None = None,
    bands: list[int] | None = None,
) -> dict:
    """``trend_degree``: None (default) lets the data choose the drift trend; an integer fixes it
    (0: the drift ignored -- for calibration contrasts only). ``bands``: the run's length bands
    (``--context-tokens A,B,...``): the verdict names them, and the same-window contrast, which
    pairs a content's renderings, is left to each band's own analysis."""
    rng = np.random.default_rng(seed)
    phases = factor_phases(r)
    shape = None if phases is None else layout(r, phases)  # which phases move: read once, used twice
    records, (r, phase_of) = r, _moving_phase(r, shape)
    fx = fit_offset_effects(r.cells(), rng, n_resamples)
    effects = fit_phase_effects(fx, fixed_degree=trend_degree)
    phases = per_phase(r, effects)
    raw = [row["accuracy"] for row in phases if row["accuracy"] is not None]
    offsets, by_offset = r.offset_means()
    period = detect_period(fx, r.step, effects.trend)
    ceiling = _ceiling_note(r)
    if ceiling:  # nothing varies: the reason every test is missing is the ceiling, not the sample size
        effects.note, period["note"] = None, ceiling
    degree = effects.trend.degree if effects.trend is not None else None
    metrics = {
        "step": r.step,
        "n_records": int(len(r.correct)),
        "n_contents": r.n_contents,
        "n_informative_contents": None if fx is None else fx.n_informative,
        "offsets": [int(d) for d in offsets],
        "overall_accuracy": float(r.correct.mean()),
        "phases": phases,
        "accuracy_interval": ACCURACY_INTERVAL,
        "model": MODEL,
        "trend_degree": degree,
        "trend": None if effects.trend is None else effects.trend.as_dict(),
        "gap_pp": None if effects.gap is None else 100 * effects.gap,
        "gap_plugin_pp": None if effects.gap_plugin is None else 100 * effects.gap_plugin,
        "gap_ci_pp": None if effects.gap_ci is None else [100 * v for v in effects.gap_ci],
        "gap_p_value": effects.gap_p,
        "homogeneity_p_value": effects.homogeneity_p,
        "gap_raw_pp": 100 * (max(raw) - min(raw)) if len(raw) >= 2 else None,
        "inference_note": _join(effects.note, _gap_caveat(period), ceiling),
        "period": period,
        "accuracy_by_offset": [float(x) for x in by_offset],
        "accuracy_ci_by_offset": r.offset_intervals(MIN_CONTENTS),
        "phase_by_offset": r.phase_by_offset(),
        "windows": None if bands and len(bands) > 1 else window_contrast(r, rng, n_resamples, trend_degree=degree or 1),
        "phase_dependence": phase_dependence(r, _record_drift(r, fx, effects)),
        "candidate_probabilities": candidate_probabilities(r),
        "log_score": log_score(r, rng, n_resamples, trend_degree),
        "phase_of": phase_of,
        "fixed_contents": fixed_contents(r),
        "factors": factor_statistics(
            records,
            _passed(effects, degree, fx, r.step),
            np.random.default_rng([seed, 7]),
            n_resamples,
            effects.note,
            shape,
        ),
    }
    if records.answer_pos is not None:  # every verdict says the prompt lengths it was measured at
        low, high = int(records.answer_pos.min()), int(records.answer_pos.max())
        metrics["lengths"] = {"min": low, "max": high, "bands": list(bands or [])}
    metrics["verdict"] = verdict(metrics)
    metrics["period"] = named_period(metrics["period"], metrics["verdict"])
    if metrics.get("log_score") and metrics["verdict"]["outcome"] != "accuracy":
        metrics["log_score"]["period"] = named_period(metrics["log_score"]["period"], metrics["verdict"])
    return metrics
