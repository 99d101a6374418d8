"""Simulated sweeps with a known truth: calibration (false-positive rates under the confounds a
real sweep has) and power (planted phase effects). DESIGN.md §3: calibration is shown, not
assumed.

A scenario draws, for C contents and D offsets, the probability that the model answers
content c right at offset d::

    p[c, d] = mean + u_c + (1 + s_c) * drift(d) + bump(d) + effect[phase(d)]     (clipped to [0.01, 0.99])

``u_c`` uneven content difficulty (uniform in ±difficulty), ``s_c`` a per-content variation of
the drift (contents drift differently: residuals are correlated within a content), ``drift``
linear and rising for shift-needle (the needle approaches the query) and concave and falling
for pad-prefix (the prompt grows), ``bump`` a Gaussian of random sign, place and width
(3-6 offsets) that no polynomial fits exactly, and ``effect`` the planted phase effects.
Each (content, offset) gets 1-3 records (``records_per_cell``). ``phase(d) = (base + d) mod step``.

Families: ``no-effect`` (difficulty only), ``drift``, ``drift+bump``; planted effects are added
to any family with ``effects_pp``. ``phase_sd_pp`` gives every content its own phase
preferences (normal, centred per content: no average phase effect, yet each answer depends
on the phase), as the tiny step-4 model shows under pad-prefix.

Same-window designs (``kv_gaps``, e.g. (0, 1)): each content is also rendered with g tokens
between a one-token key and its value (the value keeps its phase), with window = step and
align 0, so the pair shares a window iff ``phase(value) >= 1 + g``; ``format_pp`` is the
effect of each gapped rendering, ``window_pp`` the planted same-window advantage.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phasescope.analysis.flips import phase_flips
from phasescope.analysis.period import detect_period
from phasescope.analysis.phase_effects import fit_phase_effects
from phasescope.analysis.records import RecordArrays
from phasescope.analysis.windows import window_contrast
from phasescope.errors import InputError

FAMILIES = ("no-effect", "drift", "drift+bump")
DESIGNS = ("shift-needle", "pad-prefix")


@dataclass(frozen=True)
class Scenario:
    family: str = "drift"
    design: str = "shift-needle"
    n_contents: int = 30
    offsets: tuple[int, ...] = tuple(range(24))
    step: int = 4
    base_phase: int = 1  # phase at offset 0
    records_per_cell: tuple[int, int] = (1, 3)  # inclusive range
    effects_pp: tuple[float, ...] | None = None  # planted phase effects (centred to mean zero)
    mean_accuracy: float = 0.6
    difficulty: float = 0.25
    drift_pp: float = 40.0
    drift_sd: float = 0.5
    bump_pp: float = 15.0
    phase_sd_pp: float = 0.0
    kv_gaps: tuple[int, ...] = (0,)
    format_pp: float = 0.0
    window_pp: float = 0.0

    def __post_init__(self) -> None:
        if self.family not in FAMILIES or self.design not in DESIGNS:
            raise InputError(f"family in {FAMILIES}, design in {DESIGNS}; got {self.family!r}, {self.design!r}")
        if self.effects_pp is not None and len(self.effects_pp) != self.step:
            raise InputError(f"effects_pp needs one value per phase ({self.step})")

    @property
    def true_effects(self) -> np.ndarray:
        e = np.zeros(self.step) if self.effects_pp is None else np.array(self.effects_pp, dtype=float) / 100
        return e - e.mean()

    @property
    def true_gap_pp(self) -> float:
        return 100 * float(np.ptp(self.true_effects))

    def phases(self) -> np.ndarray:
        return (self.base_phase + np.array(self.offsets)) % self.step


def _drift(s: Scenario, x: np.ndarray) -> np.ndarray:
    """x in [0, 1] over the offsets -> drift in accuracy units, centred."""
    shape = x if s.design == "shift-needle" else -np.log1p(9 * x) / np.log(10)
    return s.drift_pp / 100 * (shape - shape.mean())


def probabilities(s: Scenario, rng: np.random.Generator) -> np.ndarray:
    """[C, D] probabilities of a right answer."""
    d = np.array(s.offsets, dtype=float)
    x = (d - d.min()) / max(np.ptp(d), 1)
    p = s.mean_accuracy + rng.uniform(-s.difficulty, s.difficulty, size=(s.n_contents, 1))
    if s.family != "no-effect":
        p = p + (1 + rng.normal(0, s.drift_sd, size=(s.n_contents, 1))) * _drift(s, x)[None]
    if s.family == "drift+bump":
        centre, width = rng.uniform(d.min(), d.max()), rng.uniform(3, 6)
        p = p + rng.choice([-1, 1]) * s.bump_pp / 100 * np.exp(-0.5 * ((d - centre) / width) ** 2)[None]
    p = p + s.true_effects[s.phases()][None]
    if s.phase_sd_pp:
        own = rng.normal(0, s.phase_sd_pp / 100, size=(s.n_contents, s.step))
        p = p + (own - own.mean(1, keepdims=True))[:, s.phases()]
    return np.clip(p, 0.01, 0.99)


def simulate(s: Scenario, rng: np.random.Generator) -> RecordArrays:
    p = probabilities(s, rng)
    phases = s.phases()
    parts = []
    for variant, gap in enumerate(s.kv_gaps):
        same = phases >= 1 + gap  # one-token key g tokens before the value; window = step, align 0
        shift = (s.format_pp * (gap > 0) + s.window_pp * same) / 100
        parts.append(_draw(s, np.clip(p + shift[None], 0.01, 0.99), same, variant, rng))
    return RecordArrays.concat(parts) if len(parts) > 1 else parts[0]


def _draw(s: Scenario, p: np.ndarray, same: np.ndarray, variant: int, rng: np.random.Generator) -> RecordArrays:
    """1-3 Bernoulli(p[c, d]) records per (content, offset)."""
    lo, hi = s.records_per_cell
    counts = rng.integers(lo, hi + 1, size=p.shape).ravel()
    content = np.repeat(np.arange(s.n_contents).repeat(len(s.offsets)), counts)
    offset_index = np.repeat(np.tile(np.arange(len(s.offsets)), s.n_contents), counts)
    correct = rng.random(len(content)) < np.repeat(p.ravel(), counts)
    r = RecordArrays.from_arrays(s.step, content, np.array(s.offsets)[offset_index], s.phases()[offset_index], correct)
    if len(s.kv_gaps) > 1:
        r.same_window = same[offset_index].astype(float)
        r.variant = np.full(len(content), variant)
    return r


def calibrate(
    s: Scenario, n_datasets: int, seed: int = 0, n_boot: int = 499, alpha: float = 0.05, trend_degree: int = 6
) -> dict:
    """Rejection rates of the gap, homogeneity and period tests over simulated datasets, and how
    often the gap interval covers the true gap."""
    data_rng, rng = (np.random.default_rng([seed, stream]) for stream in (0, 1))  # data fixed whatever the analysis
    gap = homogeneity = period = covered = window = window_covered = flips = 0
    for _ in range(n_datasets):
        r = simulate(s, data_rng)
        if len(s.kv_gaps) > 1:
            w = window_contrast(r, rng, n_boot)
            window += w["p_value"] is not None and w["p_value"] < alpha
            window_covered += w.get("ci_pp") is not None and w["ci_pp"][0] <= s.window_pp <= w["ci_pp"][1]
        fx = fit_phase_effects(r.cells(), rng, n_boot, trend_degree, step=s.step)
        gap += fx.gap_p is not None and fx.gap_p < alpha
        homogeneity += fx.homogeneity_p is not None and fx.homogeneity_p < alpha
        covered += fx.gap_ci is not None and fx.gap_ci[0] - 1e-9 <= s.true_gap_pp / 100 <= fx.gap_ci[1] + 1e-9
        offsets, accuracy = r.offset_means()
        found = detect_period(offsets, accuracy, rng, n_boot, alpha, trend_degree)["detected"]
        period += found is not None
        flip = phase_flips(r)  # the printed 95% interval lies above zero: nominal rate 2.5%
        flips += flip["ci_pp"] is not None and flip["ci_pp"][0] > 0
    n = n_datasets
    return {
        "gap_rejects": gap / n,
        "homogeneity_rejects": homogeneity / n,
        "period_detected": period / n,
        "gap_ci_covers": covered / n,
        "flips_positive": flips / n,
        "window_rejects": window / n,
        "window_ci_covers": window_covered / n,
        "n_datasets": n,
    }


def binomial_bound(alpha: float, n: int) -> float:
    """alpha + 2 binomial standard errors: the largest acceptable false-positive rate over n datasets."""
    return alpha + 2 * np.sqrt(alpha * (1 - alpha) / n)


__all__ = ["DESIGNS", "FAMILIES", "Scenario", "binomial_bound", "calibrate", "probabilities", "simulate"]
