"""Simulated sweeps with a known truth: calibration (false-positive rates under the confounds a
real sweep has), power (planted phase effects) and interval coverage. docs/design.md,
'Calibration': calibration is shown, not assumed.

A scenario draws, for C contents and D offsets, the probability that the model answers
content c right at offset d::

    p[c, d] = mean + u_c + (1 + s_c) * drift(d) + bump(d) + effect[phase(d)] + wave[d mod P] + own_c[phase(d)]

clipped to [0.01, 0.99]. ``u_c`` content difficulty (uniform in ±difficulty, or ``bimodal``:
±difficulty with a little jitter); ``s_c`` a per-content variation of the drift (residuals are
correlated within a content); ``drift`` linear and rising (shift-needle: the needle approaches
the query), concave and falling (pad-prefix: the prompt grows) or ``logistic``: a steep fall of
``drift_pp`` centred at a random place in the middle of the offsets, ``drift_width`` of the
offset range wide (accuracy that collapses with depth); ``bump`` a Gaussian of random sign,
place and width (3-6 offsets) that no polynomial fits exactly; ``effect`` the planted phase
effects; ``wave`` a pattern of another period (``period_pp``: residue 0 of ``offset mod P``
lower); ``own_c`` each content's own phase preferences (``phase_sd_pp``, centred per content:
no average effect, yet each answer depends on the phase). ``ceiling_share`` of the contents are
always right; ``missing`` = (phase, share): the hardest share of contents have no records at
that phase; ``ar`` = (rho, sd): each content's accuracy wanders over offsets as an AR(1)
(dependence within contents). Each (content, offset) gets 1-3 records (``records_per_cell``);
``phase(d) = (base + d) mod step``.

``starts``: where each content's answer sits at offset 0. ``"one"``: every content at
``base_phase`` (an aligned, id-level probe); ``"uniform"``: each content at its own base position,
uniform over ``START_SPAN`` tokens (a real tokenizer: each content's text has its own length);
``"harder-later"``: the same, but the base grows with the content's difficulty (longer contents
are harder and start later), so start phase and difficulty are correlated. The wave of
``period_pp`` follows the answer's position (base + d), as a compression boundary does.

Same-window designs (``kv_gaps``, e.g. (0, 1)): each content is also rendered with g tokens
between a one-token key and its value (the value keeps its phase), with window = step and
align 0, so the pair shares a window iff ``phase(value) >= 1 + g``; ``format_pp`` is the
effect of each gapped rendering, ``window_pp`` the planted same-window advantage.

``simulate`` also returns the truth the intervals should cover: the population's accuracy at
each phase (a fresh population of contents with the dataset's common drift, bump and wave) and
the root mean square of each content's own phase effects.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from phasescope.analysis.records import RecordArrays
from phasescope.analysis.stats import analyze_arrays
from phasescope.errors import InputError

FAMILIES = ("no-effect", "drift", "drift+bump")
DESIGNS = ("shift-needle", "pad-prefix")
SHAPES = ("linear", "concave", "logistic")
POPULATION = 4000  # contents drawn to compute the population truth
STARTS = ("one", "uniform", "harder-later")
START_SPAN = 48  # base positions of contents with their own start: 0..START_SPAN-1 (a multiple of 2, 3, 4, 6, 8)


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
    difficulty_shape: str = "uniform"  # or "bimodal"
    drift_pp: float = 40.0
    drift_shape: str | None = None  # None: linear for shift-needle, concave for pad-prefix
    drift_width: float = 0.1  # logistic: width as a share of the offset range
    drift_sd: float = 0.5
    bump_pp: float = 15.0
    phase_sd_pp: float = 0.0
    period_pp: tuple[int, float] | None = None  # (P, pp): residue 0 of offset mod P lower by pp
    ar: tuple[float, float] | None = None  # (rho, sd pp): each content's accuracy wanders over offsets, AR(1)
    ceiling_share: float = 0.0
    missing: tuple[int, float] | None = None  # (phase, share of the hardest contents without it)
    kv_gaps: tuple[int, ...] = (0,)
    format_pp: float = 0.0
    window_pp: float = 0.0
    starts: str = "one"

    def __post_init__(self) -> None:
        if self.starts not in STARTS:
            raise InputError(f"starts in {STARTS}; got {self.starts!r}")
        if self.family not in FAMILIES or self.design not in DESIGNS:
            raise InputError(f"family in {FAMILIES}, design in {DESIGNS}; got {self.family!r}, {self.design!r}")
        if self.drift_shape is not None and self.drift_shape not in SHAPES:
            raise InputError(f"drift_shape in {SHAPES}; got {self.drift_shape!r}")
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
        """[D] the phase at each offset of a content that starts at ``base_phase``."""
        return (self.base_phase + np.array(self.offsets)) % self.step

    def bases(self, u: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """[n] each content's answer position at offset 0, from its difficulty u [n]."""
        if self.starts == "one":
            return np.full(len(u), self.base_phase)
        base = rng.integers(0, START_SPAN, size=len(u))
        if self.starts == "harder-later":  # sorted by difficulty: the hardest contents start last
            base = np.sort(base)[np.argsort(np.argsort(-u))]
        return base


@dataclass
class Truth:
    accuracy: np.ndarray  # [step] the population's accuracy at each phase (nan: phase not swept)
    dependence_pp: float  # root mean square of the contents' own phase effects (as they act, after clipping)
    gap_pp: float
    effects: np.ndarray  # [step] planted phase effects, centred


@dataclass
class Common:
    """What every content of one simulated sweep shares."""

    drift: np.ndarray  # [D]
    bump: np.ndarray  # [D]
    missing_below: float = -np.inf  # difficulty below which a content misses ``missing``'s phase
    extra: dict = field(default_factory=dict)


def _drift_shape(s: Scenario, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """x in [0, 1] over the offsets -> drift in accuracy units, centred."""
    shape = s.drift_shape or ("linear" if s.design == "shift-needle" else "concave")
    if shape == "linear":
        curve = x
    elif shape == "concave":
        curve = -np.log1p(9 * x) / np.log(10)
    else:
        middle = rng.uniform(0.3, 0.7)
        sigmoid = 1 / (1 + np.exp(-(np.r_[x, 0.0, 1.0] - middle) / s.drift_width))
        curve = -sigmoid[:-2] / (sigmoid[-1] - sigmoid[-2])  # falls by exactly 1 over the offsets
    return s.drift_pp / 100 * (curve - curve.mean())


def _common(s: Scenario, rng: np.random.Generator) -> Common:
    d = np.array(s.offsets, dtype=float)
    x = (d - d.min()) / max(np.ptp(d), 1)
    drift = _drift_shape(s, x, rng) if s.family != "no-effect" else np.zeros(len(d))
    bump = np.zeros(len(d))
    if s.family == "drift+bump":
        centre, width = rng.uniform(d.min(), d.max()), rng.uniform(3, 6)
        bump = rng.choice([-1, 1]) * s.bump_pp / 100 * np.exp(-0.5 * ((d - centre) / width) ** 2)
    common = Common(drift, bump)
    if s.missing is not None:
        common.missing_below = float(np.quantile(_difficulty(s, POPULATION, np.random.default_rng(0)), s.missing[1]))
    return common


def _difficulty(s: Scenario, n: int, rng: np.random.Generator) -> np.ndarray:
    if s.difficulty_shape == "bimodal":
        return rng.choice([-1.0, 1.0], size=n) * s.difficulty + rng.uniform(-0.05, 0.05, size=n)
    return rng.uniform(-s.difficulty, s.difficulty, size=n)


def _contents(
    s: Scenario, common: Common, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Probabilities [n, D], difficulty [n], each content's phase effects as they act after
    clipping [n, step] (what its probabilities gain from the planted phase terms, centred), and
    the phase of each (content, offset) [n, D]."""
    u = _difficulty(s, n, rng)
    position = s.bases(u, rng)[:, None] + np.array(s.offsets)[None]  # [n, D]
    phases = position % s.step
    slope = 1 + rng.normal(0, s.drift_sd, size=(n, 1))
    base = s.mean_accuracy + u[:, None] + slope * common.drift[None] + common.bump[None]
    if s.period_pp is not None:
        period, size = s.period_pp
        base = base - size / 100 * ((position % period == 0) - 1 / period)
    if s.ar is not None:
        base = base + _wander(s.ar, n, len(s.offsets), rng)
    own = np.zeros((n, s.step))
    if s.phase_sd_pp:
        own = rng.normal(0, s.phase_sd_pp / 100, size=(n, s.step))
        own -= own.mean(axis=1, keepdims=True)
    planted = s.true_effects[phases]
    if s.phase_sd_pp:  # else own is zeros: adding them flips at most a zero's sign, and the clip maps both to 0.01
        planted = planted + np.take_along_axis(own, phases, axis=1)
    p = np.clip(base + planted, 0.01, 0.99)
    if s.ceiling_share:
        p[rng.random(n) < s.ceiling_share] = 1.0
    gain = p - np.where(p == 1.0, 1.0, np.clip(base, 0.01, 0.99))
    # records of each content at each phase [n, step]: one bincount of (content, phase) codes (a
    # comparison and a sum per phase took 3x longer)
    seen = np.bincount((np.arange(n)[:, None] * s.step + phases).ravel(), minlength=n * s.step).reshape(n, s.step)
    total = np.stack([np.where(phases == q, gain, 0.0).sum(axis=1) for q in range(s.step)], 1)
    acting = np.where(seen > 0, total / np.maximum(seen, 1), 0.0)
    return p, u, acting - acting.mean(axis=1, keepdims=True), phases


def _wander(ar: tuple[float, float], n: int, n_offsets: int, rng: np.random.Generator) -> np.ndarray:
    """[n, D] a stationary AR(1) over offsets per content (correlation rho between neighbours, sd
    in pp): dependence within a content that no phase or drift explains."""
    rho, sd = ar
    z = rng.normal(0.0, 1.0, size=(n, n_offsets))
    e = np.empty_like(z)
    e[:, 0] = z[:, 0]
    for j in range(1, n_offsets):
        e[:, j] = rho * e[:, j - 1] + np.sqrt(1 - rho**2) * z[:, j]
    return sd / 100 * e


def _truth(s: Scenario, common: Common, rng: np.random.Generator) -> Truth:
    p, u, own, phases = _contents(s, common, POPULATION, rng)
    accuracy = np.full(s.step, np.nan)
    seen = np.flatnonzero(np.bincount(phases.ravel(), minlength=s.step))  # the phases swept (np.unique: 10x slower)
    for phase in seen:
        mask = phases == phase
        if s.missing is not None and s.missing[0] == phase:
            mask &= (u >= common.missing_below)[:, None]
        # np.compress takes the same values in the same (row-major) order as p[mask], in half the time
        accuracy[phase] = np.compress(mask.ravel(), p.ravel()).mean()
    return Truth(accuracy, 100 * float(np.sqrt((own**2).mean())), s.true_gap_pp, s.true_effects)


def simulate(s: Scenario, rng: np.random.Generator, truth: bool = False) -> RecordArrays | tuple[RecordArrays, Truth]:
    """One sweep's records (and, with ``truth``, what its intervals should cover)."""
    common = _common(s, rng)
    p, u, _, phases = _contents(s, common, s.n_contents, rng)
    present = np.ones(p.shape, dtype=bool)
    if s.missing is not None:
        present[(u < common.missing_below)[:, None] & (phases == s.missing[0])] = False
    parts = []
    for variant, gap in enumerate(s.kv_gaps):
        same = phases >= 1 + gap  # one-token key g tokens before the value; window = step, align 0
        shift = (s.format_pp * (gap > 0) + s.window_pp * same) / 100
        parts.append(_draw(s, np.clip(p + shift, 0.0, 1.0), present, phases, same, variant, rng))
    records = RecordArrays.concat(parts) if len(parts) > 1 else parts[0]
    return (records, _truth(s, common, rng)) if truth else records


def _draw(
    s: Scenario, p: np.ndarray, present: np.ndarray, phases: np.ndarray, same: np.ndarray, variant: int, rng
) -> RecordArrays:
    """1-3 Bernoulli(p[c, d]) records per (content, offset) present; phases, same [n, D]."""
    lo, hi = s.records_per_cell
    counts = rng.integers(lo, hi + 1, size=p.shape) * present
    counts = counts.ravel()
    content = np.repeat(np.arange(s.n_contents).repeat(len(s.offsets)), counts)
    offset_index = np.repeat(np.tile(np.arange(len(s.offsets)), s.n_contents), counts)
    correct = rng.random(len(content)) < np.repeat(p.ravel(), counts)
    phase = np.repeat(phases.ravel(), counts)
    r = RecordArrays.from_arrays(s.step, content, np.array(s.offsets)[offset_index], phase, correct)
    r.content_ids = list(range(s.n_contents))
    if len(s.kv_gaps) > 1:
        r.same_window = np.repeat(same.ravel(), counts).astype(float)
        r.variant = np.full(len(content), variant)
    return r


def _covers(interval, value: float, tol: float = 1e-9) -> bool:
    return interval is not None and interval[0] - tol <= value <= interval[1] + tol


def _tally(m: dict, truth: Truth, s: Scenario, alpha: float) -> dict[str, float]:
    """One analysed sweep's contribution to each rate (nan: the rate does not apply to it)."""
    rejects = lambda p: float(p is not None and p < alpha)  # noqa: E731 -- withheld counts as not rejecting
    period, dep, win = m["period"], m["phase_dependence"] or {}, m["windows"] or {}
    rows = [row for row in m["phases"] if row["ci_low"] is not None]
    effects = [row for row in m["phases"] if row["effect_ci_pp"] is not None]
    nan = float("nan")
    return {
        "gap_rejects": rejects(m["gap_p_value"]),
        "gap_withheld": float(m["gap_p_value"] is None),
        "homogeneity_rejects": rejects(m["homogeneity_p_value"]),
        "period_detected": float(period["detected"] is not None),
        "period_at_step": float(period["detected"] is not None and s.step % period["detected"] == 0),
        "period_withheld": float(period["p_value"] is None),
        "dependence_rejects": rejects(dep.get("p_value")),
        "gap_ci_covers": float(_covers(m["gap_ci_pp"], truth.gap_pp)) if m["gap_ci_pp"] else nan,
        "accuracy_ci_covers": np.mean([_covers((r["ci_low"], r["ci_high"]), truth.accuracy[r["phase"]]) for r in rows])
        if rows
        else nan,
        "effect_ci_covers": np.mean([_covers(r["effect_ci_pp"], 100 * truth.effects[r["phase"]]) for r in effects])
        if effects
        else nan,
        "dependence_ci_covers": float(_covers(dep.get("ci_pp"), truth.dependence_pp)) if dep.get("ci_pp") else nan,
        "gap_error_pp": m["gap_pp"] - truth.gap_pp if m["gap_pp"] is not None else nan,
        "gap_plugin_error_pp": m["gap_plugin_pp"] - truth.gap_pp if m["gap_plugin_pp"] is not None else nan,
        "claims_effect_or_pattern": float(bool({"gap", "period"} & set(m["verdict"]["claims"]))),
        "claims_anything": float(bool(m["verdict"]["claims"])),
        "claims_step_period": float("period" in m["verdict"]["claims"] and period["detected"] == s.step),
        "claims_period_8": float("period" in m["verdict"]["claims"] and period["detected"] == 2 * s.step),
        "window_rejects": rejects(win.get("p_value")),
        "window_ci_covers": float(_covers(win.get("ci_pp"), s.window_pp)) if win.get("ci_pp") else nan,
    }


def calibrate(
    s: Scenario, n_datasets: int, seed: int = 0, n_boot: int = 499, alpha: float = 0.05, trend_degree: int | None = None
) -> dict:
    """Rates over simulated datasets, each analysed by ``analyze_arrays`` as a user's sweep is:
    rejection rates (withheld p-values count as not rejecting; ``*_withheld`` says how often),
    interval coverage (over the datasets that gave the interval) and the mean error of the gap
    estimates. ``trend_degree``: fix the trend (0: the drift ignored) instead of choosing it."""
    data_rng = np.random.default_rng([seed, 0])  # data fixed whatever the analysis
    rows = []
    for i in range(n_datasets):
        r, truth = simulate(s, data_rng, truth=True)
        m = analyze_arrays(r, seed=seed * 100_003 + i, n_resamples=n_boot, trend_degree=trend_degree)
        rows.append(_tally(m, truth, s, alpha))
    out = {}
    for key in rows[0]:
        values = np.array([row[key] for row in rows], dtype=float)
        seen = values[~np.isnan(values)]
        out[key] = float(seen.mean()) if len(seen) else None
    return out | {"n_datasets": n_datasets}


def binomial_bound(alpha: float, n: int) -> float:
    """alpha + 2 binomial standard errors: the largest acceptable false-positive rate over n datasets."""
    return alpha + 2 * np.sqrt(alpha * (1 - alpha) / n)


__all__ = [
    "DESIGNS",
    "FAMILIES",
    "SHAPES",
    "Scenario",
    "Truth",
    "binomial_bound",
    "calibrate",
    "simulate",
    "simulate_ceiling_margins",
]


def simulate_ceiling_margins(
    rng: np.random.Generator,
    n_contents: int = 60,
    offsets: int = 24,
    step: int = 4,
    effect=None,
    drift: float = 3.0,
    records: int = 1,
) -> RecordArrays:
    """A sweep at the ceiling (every answer right) whose log-prob margins are: a skewed content
    level (gamma) + a steep logistic drift over offsets (``drift`` nats) + a phase effect
    (``effect``, nats per phase) + heavy-tailed t(4) noise (for ``analysis.log_score``)."""
    content = np.repeat(np.arange(n_contents), offsets * records)
    offset = np.tile(np.repeat(np.arange(offsets), records), n_contents)
    phase = offset % step
    level = rng.gamma(2.0, 1.5, n_contents)[content]
    trend = drift / (1 + np.exp(-(offset - offsets / 2) / 1.5))
    planted = np.zeros(step) if effect is None else np.asarray(effect, dtype=float)
    r = RecordArrays.from_arrays(step, content, offset, phase, np.ones(len(content)))
    r.margin = level + trend + planted[phase] + 0.8 * rng.standard_t(4, len(content))
    return r


def simulate_twice_the_step(seed: int, pp: float, n_offsets: int = 48, n_contents: int = 60) -> RecordArrays:
    """A period of twice the step with no step component (issue #43): step 4, one window of 4 tokens
    better by ``pp`` and the next worse by ``pp``, a 15 pp linear drift, difficulty uniform in ±0.25;
    one record per (content, offset)."""
    rng = np.random.default_rng([11, seed])
    u = rng.uniform(-0.25, 0.25, n_contents)
    d = np.arange(n_offsets)
    pattern = np.where((d % 8) < 4, pp / 100, -pp / 100) + 0.15 * np.linspace(-0.5, 0.5, n_offsets)
    correct = rng.random((n_contents, n_offsets)) < np.clip(0.6 + u[:, None] + pattern[None], 0.01, 0.99)
    c, o = np.meshgrid(np.arange(n_contents), d, indexing="ij")
    return RecordArrays.from_arrays(4, c.ravel(), o.ravel(), o.ravel() % 4, correct.ravel())
