"""Period detection over offsets (docs/design.md, 'Period test'), conditional on the contents, with the drift
chosen and checked for every candidate.

Input: the column effects of stage 1 (``offset_effects``): accuracy at each offset *within
contents*, so contents missing at some offsets cannot fake a period (pooled means per offset
did: hard contents missing at phase 3 gave a "period" 83 % of the time). For every candidate P
the model is::

    delta[offset] = c + trend(offset) + g[offset mod P]

with the trend of the phase-effects model (chosen and checked next to the step's phases by
``trend.select_trend``: one trend for the gap, homogeneity, period and same-window statistics).
A candidate is **testable** when every residue class holds ``MIN_CYCLES`` offsets and that
trend stays separable from its residues (``trend.inflation`` at most ``MAX_INFLATION``); the
output lists the candidates left out and why. Why not a trend chosen per candidate: the
residues of a long period soak up a trend's misfit, so its own lack-of-fit check passes too
early and the misfit reads as a period (measured: a 60 pp logistic drift at 1000 contents gave
a "period" in a third of the datasets that way). A steep drift at 1000 contents used to read as
a period of 9-12: a cubic trend left a smooth wave, and shuffling offsets destroyed the
smoothness that made it a trend.

Statistic: for each testable P, the cluster-robust Wald statistic of the residue effects, as a
chi-square p-value; the test statistic is the smallest of these over candidates, and its null
distribution comes from the wild cluster bootstrap draws of stage 1 (the same draws for every
candidate, so their dependence is kept). If significant, the best candidate is first replaced
by a multiple of it that explains significantly more (a bootstrap Wald test of the finer
residues: a strong step-4 pattern also makes period 2 significant), then reduced to its
smallest divisor that it does not beat, so 4, not 2 or 8, when 4 explains it. A period that is neither the step nor a
divisor of it is flagged: "a period-P pattern, not a step-phase effect".

``candidate_p`` (the periodogram): each candidate's p-value against the same null as the test
(the smallest p over every candidate), so the test's p-value is the smallest of them;
``multiple_ps``: each multiple of the step tried, Bonferroni over them (the multiples' claim is
the smallest). ``explained``: the share of the variance of the offset effects left by the
trend that ``offset mod P`` explains; ``explained_null``: the 95th percentile of that share on the
bootstrap's noise alone (what P reaches with no pattern: the periodogram's null band).

Shape legend: D offsets, K coefficients, B draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from phasescope.analysis.cluster_ols import bootstrap_p
from phasescope.analysis.offset_effects import MIN_CONTENTS, Linear, OffsetEffects, few_varying_advice, linear
from phasescope.analysis.phase_effects import WALD_TOL, _wald
from phasescope.analysis.pvalue import p_text
from phasescope.analysis.trend import (
    MAX_INFLATION,
    MIN_CYCLES,
    TrendChoice,
    design,
    dummies,
    inflation,
    label_rows,
    modulated,
    select_trend,
    wls_map,
)

DIVISOR_SHARE = 0.2  # a divisor of the step is named when at most this share of the step's pattern goes beyond it


def candidates(offsets: np.ndarray) -> list[int]:
    """Periods whose every residue class holds MIN_CYCLES offsets."""
    offsets = np.unique(offsets)
    out = []
    for period in range(2, len(offsets) // MIN_CYCLES + 1):
        if np.bincount(offsets % period, minlength=period).min() >= MIN_CYCLES:
            out.append(period)
    return out


def residues(fx: OffsetEffects, period: int, step: int) -> np.ndarray | str:
    """[J] each column's place in a cycle of ``period`` tokens, or why the columns do not fix it.
    Aligned sweeps: ``offset mod period`` (every content's anchor moves with the offset from one
    base). Contents that start at different phases: the anchor's phase fixes ``position mod
    period`` only for a period that divides the step (``phase mod period``)."""
    if fx.aligned():
        return fx.offset % period
    if step % period == 0:
        return fx.phase % period
    return (
        f"period {period}: contents start at different phases, and a column fixes the answer's position only "
        f"modulo the step ({step}); periods that do not divide it need a sweep whose contents start at one phase "
        "(--same-phase)"
    )


def detect_period(fx: OffsetEffects | None, step: int, trend: TrendChoice | None, alpha: float = 0.05) -> dict:
    """``trend``: the phase-effects model's trend (None or without a degree: not separable)."""
    if fx is None:
        return _none("no offset is compared within a content")
    periods = candidates(fx.offset)
    if not periods:
        return _none(f"{len(fx.offset)} offsets identify no candidate period (each residue class needs {MIN_CYCLES})")
    if trend is None or trend.degree is None or (fx.inference and not trend.checked):
        return _none(f"the drift over offsets cannot be separated from a periodic pattern: {trend and trend.note}")
    fits, untestable = {}, {}
    for period in periods:
        fitted = _candidate(fx, period, step, trend.degree)
        if isinstance(fitted, str):
            untestable[period] = fitted
        else:
            fits[period] = fitted
    result = _none(None) | {
        "explained": {p: f["explained"] for p, f in fits.items()},
        "explained_null": {p: f["explained_null"] for p, f in fits.items() if f["explained_null"] is not None},
        "trend_degree": trend.degree,
        "tested": sorted(fits),
        "untestable": untestable,
    }
    if not fits:
        return result | {"note": "no candidate period can be tested: " + "; ".join(untestable.values())}
    if not fx.inference:
        return result | {
            "note": f"only {fx.n_informative} content samples whose answers vary: the period test needs at least "
            f"{MIN_CONTENTS} ({few_varying_advice(fx.n_informative, fx.n_contents)}); the periodogram describes "
            "these contents only"
        }
    # multiples of the step are one claim of their own (``_multiple``), never reached by refining the
    # step's own pattern: each refinement at full alpha named a wrong multiple in up to 14% of sweeps
    multiples = [q for q in periods if q % step == 0 and q > step]
    main = {p: f for p, f in fits.items() if p not in multiples}
    found = _test(main, step, alpha) if main else {"note": "only multiples of the step can be tested"}
    found = _against_step(found, fx, main, step, trend.degree, alpha)
    return result | _one_claim(found, _multiple(fx, step, multiples), alpha)


def _against_step(found: dict, fx: OffsetEffects, fits: dict, step: int, degree: int, alpha: float) -> dict:
    """A period other than the step is named only with evidence against the step (the step is the
    prior hypothesis; naming the best-fitting candidate named a divisor or another period in up
    to 14% of sweeps whose truth was the step's). A divisor d: when at most ``DIVISOR_SHARE`` of
    the step's phase pattern goes beyond the classes mod d (a 1 - alpha bootstrap bound: no test
    can show phases r and r + d equal, a bound can show them close). Another period: when its
    residues explain the offsets significantly beyond the step's phases in one model."""
    period = found.get("detected")
    if period is None or period == step or step not in fits:
        return found
    if step % period == 0:
        upper = _beyond_share_upper(fits[step]["fitted"], step, period, alpha)
        if upper <= DIVISOR_SHARE:
            return found | {"divisor_share_upper": upper}
        note = (
            f"period {period} fits best but is not named: up to {upper:.0%} of the step's phase pattern goes beyond "
            f"the classes mod {period} ({1 - alpha:.0%} bound; a divisor is named below {DIVISOR_SHARE:.0%})"
        )
        return found | {"detected": step, "kind": "step", "divisor_share_upper": upper, "note": note}
    beyond = _beyond_step_p(fx, period, step, degree)
    if beyond < alpha:
        return found | {"beyond_step_p": beyond}
    note = (
        f"period {period} fits best, but adds nothing significant beyond the step's phases ({p_text(beyond)}): "
        "the step is named"
    )
    return found | {"detected": step, "kind": "step", "beyond_step_p": beyond, "note": note}


def _beyond_share_upper(fitted: Linear, step: int, divisor: int, alpha: float) -> float:
    """The 1 - alpha bootstrap upper bound of the share of the step's phase pattern (sum of squared
    phase effects) that the classes mod ``divisor`` leave over. Squared norms grow with noise, so
    the bound leans towards naming the step."""
    draws = fitted.theta + np.concatenate([np.zeros((1, len(fitted.theta))), fitted.boot])  # [B+1, K]
    effects = draws @ label_rows(step, len(fitted.theta)).T  # [B+1, step]: each phase's effect, centred
    classes = effects.reshape(len(effects), step // divisor, divisor).mean(axis=1)  # [B+1, divisor]
    beyond = effects - np.tile(classes, step // divisor)
    total = np.maximum((effects**2).sum(axis=1), 1e-18)
    return float(np.quantile((beyond**2).sum(axis=1) / total, 1 - alpha))


def _beyond_step_p(fx: OffsetEffects, period: int, step: int, degree: int) -> float:
    """Bootstrap p-value that residues mod ``period`` explain the offsets beyond the step's phases
    and the trend: the residues' indicators with the step's model projected out (weighted), kept
    where they are not collinear with it."""
    base = design(fx.offset, degree, residues(fx, step, step), fx.component)
    extra = dummies(residues(fx, period, step))
    extra = extra - base @ (wls_map(base, fx.weight) @ extra)
    _, singular, vt = np.linalg.svd(np.sqrt(fx.weight)[:, None] * extra, full_matrices=False)
    keep = singular > 1e-8 * max(singular.max(initial=0.0), 1e-300)
    if not keep.any():
        return 1.0
    x = np.concatenate([base, extra @ vt[keep].T], axis=1)
    return _rows_p(linear(fx, wls_map(x, fx.weight)), np.eye(x.shape[1])[base.shape[1] :])


def _rows_p(fitted: Linear, rows: np.ndarray) -> float:
    """Bootstrap p-value of the Wald statistic of ``rows @ theta`` (rows [R, K]) against its
    wild-bootstrap null."""
    observed = _wald(rows @ fitted.theta, rows @ fitted.cov @ rows.T)
    null = _wald(fitted.boot @ rows.T, rows @ fitted.boot_cov @ rows.T)
    return bootstrap_p(null, float(observed), tol=WALD_TOL)


def _one_claim(found: dict, multiple: dict, alpha: float) -> dict:
    """The period named under one alpha: the test over the step, its divisors and other periods,
    and the multiples' test, Holm-adjusted together (either alone at full alpha named a period in
    up to twice alpha of the sweeps without one)."""
    from phasescope.analysis.verdict import holm

    adjusted = holm({"period": found.get("p_value"), "multiple": multiple.get("multiple_test_p")})
    base = {"base_detected": found.get("detected"), "base_kind": found.get("kind")}
    out = found | base | {k: v for k, v in multiple.items() if k in ("multiple_test_p", "multiple_candidate",
                                                                      "multiples_tried", "multiple_note",
                                                                      "multiple_ps")}  # fmt: skip
    if adjusted.get("multiple", 1.0) < alpha:
        return out | {k: v for k, v in multiple.items() if k in ("detected", "kind", "multiple_p", "step_component_p",
                                                                 "note")}  # fmt: skip
    if adjusted.get("period", 1.0) >= alpha:
        out |= {"detected": None, "kind": None} | ({"note": None} if found.get("kind") else {})
    return out


def _multiple(fx: OffsetEffects, step: int, multiples: list[int]) -> dict:
    """A pattern that repeats every P = k·step tokens beyond the step's phases (period 8 at step 4:
    one window in two is worse), with or without a step-phase pattern beside it. The phases' trend
    is chosen next to the step's phases only and may absorb such a pattern, so each multiple gets
    its own trend, chosen and checked next to its residues; the test is whether residues mod P
    differ beyond the step's phases. One claim over all the multiples tried: the smallest p,
    Bonferroni-adjusted (``multiple_test_p``), which the verdict adjusts again with its other claims."""
    passed = {}
    for period in multiples:
        residue = residues(fx, period, step)
        if isinstance(residue, str):
            continue
        choice = select_trend(fx, residue, f"residue mod {period}")
        if choice.degree is None or not choice.checked:
            continue
        fitted = _fading_model(fx, residue, step, choice.degree)
        passed[period] = (_finer_p(fitted, period, step), fitted)
    if not passed:
        return {"multiple_test_p": None, "multiple_note": _untold_multiple(fx, step, multiples)}
    period = min(passed, key=lambda q: (passed[q][0], q))  # the strongest; the shortest of tied ones
    finer, fitted = passed[period]
    adjusted = min(1.0, finer * len(passed))
    out = {
        "multiple_test_p": adjusted,
        "multiple_candidate": period,
        "multiples_tried": sorted(passed),
        "multiple_ps": {q: min(1.0, passed[q][0] * len(passed)) for q in sorted(passed)},  # each, Bonferroni
    }
    return out | _as_multiple(period, step, finer, _step_part_p(fitted, period, step))


def _untold_multiple(fx: OffsetEffects, step: int, multiples: list[int]) -> str:
    """Why no multiple of the step was tested: these offsets cannot tell a pattern every k·step
    tokens from the step's own (said beside a period named the step, so it is not read as one)."""
    if multiples:
        return (
            f"a multiple of the step ({', '.join(map(str, multiples))}) cannot be told apart from it here: its drift "
            "is not separable from its residues or the contents start at different phases"
        )
    span = MIN_CYCLES * 2 * step
    return (
        f"a multiple of the step cannot be told apart from it with these offsets (period {2 * step} needs offsets "
        f"spanning {span} tokens, e.g. --offsets 0:{span})"
    )


def _as_multiple(period: int, step: int, finer: float, step_part: float) -> dict:
    """The period result for a multiple of the step: its pattern beyond the step's phases and the
    step's own component, both said."""
    note = (
        f"a period-{period} pattern: the step's phases (step {step}, {p_text(step_part)}) and a pattern that repeats "
        f"every {period} tokens beyond them ({p_text(finer)})"
    )
    return {"detected": period, "kind": "multiple", "multiple_p": finer, "step_component_p": step_part, "note": note}


def _fading_model(fx: OffsetEffects, residue: np.ndarray, step: int, degree: int) -> dict:
    """The components' intercepts, the trend, the step's phase pattern changing linearly along the
    offsets, and residues mod P (last). A phase effect that fades along the offsets (toward a
    ceiling) makes residue r and r + step differ -- r + step is always later -- and must not read
    as a pattern that repeats every P tokens."""
    fading = modulated(fx.offset, residue % step)[:, step - 1 :]  # the step's indicators x the centred offset
    base = design(fx.offset, degree, residue, fx.component)
    n_trend = fx.n_components + degree
    x = np.concatenate([base[:, :n_trend], fading, base[:, n_trend:]], axis=1)
    return {"fitted": linear(fx, wls_map(x, fx.weight)), "x": x}


def _step_part_p(fit: dict, period: int, step: int) -> float:
    """Bootstrap p-value of the step's component inside a period-P model: the residues' means over
    each phase (residues r and r + step, r + 2 step, ...) differ."""
    n_cols = fit["x"].shape[1]
    index = n_cols - period
    means = np.zeros((step, n_cols))
    for r in range(1, period):
        means[r % step, index + r] = step / period
    return _rows_p(fit["fitted"], means[1:] - means[0])  # phases 1.. against phase 0 (residue 0: the reference)


def _candidate(fx: OffsetEffects, period: int, step: int, degree: int) -> dict | str:
    """The candidate's fitted model, or why it cannot be tested."""
    residue = residues(fx, period, step)
    if isinstance(residue, str):
        return residue
    if len(np.unique(residue)) < period:
        return f"period {period}: the columns do not cover every residue"
    if inflation(fx.offset, fx.weight, residue, degree, fx.component) > MAX_INFLATION:
        return f"period {period}: with the drift's trend (degree {degree}) it cannot be told from the drift"
    x = design(fx.offset, degree, residue, fx.component)
    n_trend = fx.n_components + degree
    # each map once: the fit, the share explained and its null band all use the same two
    full, trend = WlsFit(x, wls_map(x, fx.weight)), WlsFit(x[:, :n_trend], wls_map(x[:, :n_trend], fx.weight))
    return {
        "fitted": linear(fx, full.coef),
        "groups": slice(n_trend, None),
        "x": x,
        "explained": _explained(fx, full, trend),
        "explained_null": _explained_null(fx, full, trend),
    }


@dataclass
class WlsFit:
    """A WLS design [J,K] and its coefficients as a linear map of the column effects [K,J] (``wls_map``)."""

    x: np.ndarray
    coef: np.ndarray

    def rss(self, weight: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Weighted residual sum of squares of ``values`` ([J], or [B,J] one row each) after the fit."""
        resid = values - (values @ self.coef.T) @ self.x.T
        return (weight * resid**2).sum(axis=-1)


def _explained(fx: OffsetEffects, full: WlsFit, trend: WlsFit) -> float:
    """Share of the weighted variance left by the trend alone that the residues explain."""
    total = float(trend.rss(fx.weight, fx.effect))
    return float(1 - full.rss(fx.weight, fx.effect) / total) if total > 1e-18 else 0.0


def _explained_null(fx: OffsetEffects, full: WlsFit, trend: WlsFit, level: float = 0.95) -> float | None:
    """The share ``_explained`` reaches on the bootstrap's noise alone ([B,J] column deviations, no
    pattern), at ``level``: the periodogram's null band (None without a bootstrap)."""
    if not fx.inference:
        return None
    delta, _ = fx.draws()
    noise = np.zeros((len(delta), len(fx.effect)))  # [B,J]: reference columns do not move
    noise[:, fx.estimated] = delta
    share = 1 - full.rss(fx.weight, noise) / np.maximum(trend.rss(fx.weight, noise), 1e-18)
    return float(np.quantile(share, level))


def _log_pvalues(fits: dict) -> tuple[dict[int, float], list[np.ndarray]]:
    """Log chi-square p-value of each candidate's residue Wald statistic (logs: strong patterns would
    all underflow to p = 0 and tie): observed, and one per bootstrap draw. One ``logsf`` call for all
    candidates and draws: scipy's overhead per call was most of the cost, and the function is
    elementwise, so each value is the one a call of its own gives."""
    stats, dofs = [], []
    for period, f in fits.items():
        fitted, groups = f["fitted"], f["groups"]
        observed = _wald(fitted.theta[groups], fitted.cov[groups, groups])
        null = _wald(fitted.boot[:, groups], fitted.boot_cov[:, groups, groups])
        stats.append(np.r_[observed, null])
        dofs.append(np.full(len(stats[-1]), period - 1))
    ends = np.cumsum([len(v) for v in stats])[:-1]
    logs = np.split(chi2.logsf(np.concatenate(stats), np.concatenate(dofs)), ends)
    return {period: float(v[0]) for period, v in zip(fits, logs, strict=True)}, [v[1:] for v in logs]


def _test(fits: dict, step: int, alpha: float) -> dict:
    observed, null = _log_pvalues(fits)
    smallest = min(observed.values())
    # each candidate against the null of the smallest over all of them (single-step min-p): the
    # test's p-value is the smallest of these, so a figure of them shows exactly what was tested
    least = -np.min(null, axis=0)  # small p-values are extreme
    candidate_p = {p: bootstrap_p(least, -observed[p]) for p in fits}
    p_value = bootstrap_p(least, -smallest)
    if p_value >= alpha:
        return {"p_value": p_value, "candidate_p": candidate_p}
    # tied p-values (a pattern so clean that every candidate's p underflows): the one explaining
    # the most of the offset pattern, then the shortest (a noiseless step-4 pattern read as period 3
    # when the shortest tied candidate was taken, then refined to 6)
    tied = [p for p in fits if observed[p] == smallest]
    best = min(tied, key=lambda p: (-round(fits[p]["explained"], 9), p))
    for multiple in sorted(m for m in fits if m > best):  # a finer period that explains more
        # a multiple of the best so far: once 2 gave way to 4, period 6 is no refinement of it
        if multiple % best == 0 and _finer_p(fits[multiple], multiple, best) < alpha:
            best = multiple
    detected = next(q for q in sorted(fits) if best % q == 0 and _finer_p(fits[best], best, q) >= alpha)
    if step % detected == 0:
        return {"p_value": p_value, "detected": detected, "kind": "step", "candidate_p": candidate_p}
    note = (
        f"a period-{detected} pattern, not a step-phase effect (step {step}): the phase effects and the gap "
        f"mix it with the step's phases"
    )
    return {"p_value": p_value, "detected": detected, "kind": "other", "note": note, "candidate_p": candidate_p}


def _finer_p(fit: dict, period: int, divisor: int) -> float:
    """Bootstrap p-value that residues mod ``period`` differ beyond residues mod ``divisor``
    (1.0 when they are the same period)."""
    if period == divisor:
        return 1.0
    n_cols = fit["x"].shape[1]
    index = n_cols - period  # coefficient of residue r >= 1 sits at index + r; residue 0 is the reference
    rows = np.zeros((period - divisor, n_cols))
    for i, r in enumerate(range(divisor, period)):
        rows[i, index + r] = 1.0
        if r % divisor:
            rows[i, index + r % divisor] -= 1.0
    return _rows_p(fit["fitted"], rows)


def _none(note: str | None) -> dict:
    return {
        "detected": None,
        "p_value": None,
        "kind": None,
        "explained": {},
        "explained_null": {},
        "trend_degree": None,
        "tested": [],
        "untestable": {},
        "multiple_p": None,  # kind "multiple": the residues mod the detected period beyond the step's phases
        "step_component_p": None,  # kind "multiple": the step's own phases inside that model
        "multiple_test_p": None,  # the claim "a multiple of the step": smallest p over the multiples, Bonferroni
        "multiple_candidate": None,  # the multiple with that p
        "multiples_tried": [],
        "candidate_p": {},  # each tested candidate (multiples apart) against the null of the smallest p over them
        "multiple_ps": {},  # each multiple of the step tried: its residues beyond the step's phases, Bonferroni
        "multiple_note": None,  # no multiple of the step could be tested: why
        "base_detected": None,  # the period among the step, its divisors and other periods (multiples apart)
        "base_kind": None,
        "divisor_share_upper": None,  # a divisor of the step found best: bound of the step's pattern beyond it
        "beyond_step_p": None,  # another period found best: its residues beyond the step's phases
        "note": note,
    }
