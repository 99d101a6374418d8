"""The drift over offsets, chosen by the data and checked (docs/design.md, 'The drift model').

Accuracy drifts with the offset (shift-needle moves the needle toward the query, pad-prefix
lengthens the prompt), and a phase is a function of the offset, so a drift the model does not
follow leaks into the phase effects -- more visibly the more contents there are, since the leak
is a bias and the noise shrinks. Stage 2 models the column effects of stage 1 as::

    delta[column] = c[component] + sum_j b_j P_j(offset) + g[label]

``P_j``: Legendre polynomials of the offset scaled to [-1, 1]; ``label``: the phase (gap,
homogeneity) or ``offset mod P`` (period P); ``c[component]``: one intercept per component of
columns (``offset_effects``: contents that start at different phases are compared only through
the shared trend and labels). The degree is chosen for each model by the data:

* **separable degrees**: a degree is allowed when the label effects' standard errors grow by
  at most ``MAX_INFLATION`` over a linear trend (a polynomial flexible enough to mimic the
  periodic pattern would absorb it); ``MIN_CYCLES`` offsets per label at least (with two windows
  a drift and a phase effect cannot be told apart from the data);
* **two checks per degree** k, from half the largest separable degree up (``floor_degree``): *lack
  of fit* -- the next ``LOOKAHEAD`` Legendre terms, fitted next to the labels (which may change
  linearly along the offsets, so a phase effect that fades is not taken for a drift), add nothing;
  *stability* -- the label effects equal those under the most flexible separable trend (a misfit
  that leaks into them shows as a difference, however far beyond the look-ahead it lies). The
  smallest k whose two p-values are both above ``CHECK_LEVEL`` = 0.1 is chosen: a trend the data
  do not reject, and no more flexible than that. (Until issue #56 the level was 0.5, so that the
  trend would err toward flexible; on data without drift that put the degree anywhere between
  the floor and the largest separable degree -- degree 10 over 30 offsets -- and measured,
  ``experiments/trend_degree.py``, it bought no calibration: false gaps under steep drift were
  no fewer.)
* **checkable**: the look-ahead terms must not overlap the labels (largest canonical
  correlation, both with the trend removed, at most ``MAX_OVERLAP``): a misfit that lies along
  the labels is invisible to the lack-of-fit test and leaks into the label effects whole
  (with 24 offsets at step 8 only a linear trend is checkable; at step 4, degree 9);
* when no separable degree passes, the trend **cannot be separated** from the labels (a drift
  too steep for the offsets, or a pattern of another period): the caller withholds its
  p-values and says why.

Both check statistics are sums of squared t statistics (of the look-ahead terms; of the
differences between label effects); their null distributions come from the same wild cluster
bootstrap draws as everything else.

Shape legend: J columns, K stage-2 coefficients, L labels, B bootstrap draws.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from phasescope.analysis.cluster_ols import bootstrap_p, safe_ratio
from phasescope.analysis.offset_effects import OffsetEffects, linear
from phasescope.analysis.pvalue import p_text

MAX_INFLATION = 1.25  # largest allowed growth of the label effects' standard errors over a linear trend
MAX_OVERLAP = 0.7  # largest canonical correlation of the look-ahead terms with the labels (given the trend)
MIN_CYCLES = 3  # offsets per label (phase or residue) needed before a trend can be checked
LOOKAHEAD = 4  # Legendre terms tested beyond the chosen degree
CHECK_LEVEL = 0.1  # the smallest degree whose two checks both have p above this is chosen


@dataclass
class TrendChoice:
    degree: int | None  # None: no trend can be fitted next to these labels
    checked: bool  # the data confirmed the degree (lack of fit not significant)
    lof_p: float | None  # the chosen degree's check p-value: the smaller of lack of fit and stability
    max_degree: int  # largest separable degree
    tried: list[tuple[int, float, float]] = field(default_factory=list)  # (degree, lack-of-fit p, stability p)
    note: str | None = None

    def as_dict(self) -> dict:
        return {
            "degree": self.degree,
            "checked": self.checked,
            "check_p": self.lof_p,
            "max_separable_degree": self.max_degree,
            "tried": [{"degree": k, "lack_of_fit_p": p, "stability_p": q} for k, p, q in self.tried],
            "note": self.note,
        }


def frozen(a: np.ndarray | None) -> tuple | None:
    """An array as a hashable cache key (dtype, shape, bytes): the same values give the same key."""
    if a is None:
        return None
    a = np.asarray(a)
    return a.dtype.str, a.shape, a.tobytes()


def thawed(key: tuple | None) -> np.ndarray | None:
    """The read-only array of a ``frozen`` key."""
    if key is None:
        return None
    dtype, shape, data = key
    return np.frombuffer(data, dtype=dtype).reshape(shape)


def legendre(offset: np.ndarray, degree: int) -> np.ndarray:
    """[J, degree] Legendre polynomials 1..degree of the offset scaled to [-1, 1]. Read-only, cached
    by value: a calibration run expands the same few offset grids over a hundred thousand times."""
    return _legendre(frozen(offset), degree)


@lru_cache(maxsize=128)
def _legendre(offset: tuple, degree: int) -> np.ndarray:
    offset = thawed(offset)
    lo, hi = float(offset.min()), float(offset.max())
    x = 2 * (offset - lo) / (hi - lo) - 1 if hi > lo else np.zeros(len(offset))
    out = np.polynomial.legendre.legvander(x, degree)[:, 1:]
    out.flags.writeable = False
    return out


def dummies(labels: np.ndarray) -> np.ndarray:
    """[J, L-1] indicators of every label but the first (sorted)."""
    levels = np.unique(labels)
    return (labels[:, None] == levels[None, 1:]).astype(float)


def intercepts(n_cols: int, component: np.ndarray | None) -> np.ndarray:
    """[J, G]: one intercept per component of columns (a single column of ones when there is one)."""
    if component is None:
        return np.ones((n_cols, 1))
    return (component[:, None] == np.arange(int(component.max()) + 1)[None]).astype(float)


def design(offset: np.ndarray, degree: int, labels: np.ndarray, component: np.ndarray | None = None) -> np.ndarray:
    """[J, K]: the components' intercepts (G), Legendre 1..degree, label indicators (last). Read-only,
    cached by value: the checks of every degree and period candidate rebuild the same few designs."""
    return _design(frozen(offset), degree, frozen(labels), frozen(component))


@lru_cache(maxsize=512)  # 48 offsets: a dozen period candidates' labels times twenty degrees
def _design(offset: tuple, degree: int, labels: tuple, component: tuple | None) -> np.ndarray:
    offset, labels, component = thawed(offset), thawed(labels), thawed(component)
    base = intercepts(len(offset), component)
    out = np.concatenate([base, legendre(offset.astype(float), degree), dummies(labels)], axis=1)
    out.flags.writeable = False
    return out


def wls_map(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """[K, J]: weighted least squares coefficients as a linear map of the column effects. Read-only,
    cached by value: one analysis asks for the same map up to four times (the phase model in the trend
    checks, the phase effects and the period test; the most flexible trend at every degree tried)."""
    return _wls_map(frozen(x), frozen(weight))


@lru_cache(maxsize=64)
def _wls_map(x: tuple, weight: tuple) -> np.ndarray:
    x, weight = thawed(x), thawed(weight)
    root = np.sqrt(weight)[:, None]
    out = np.linalg.pinv(root * x) * root.T
    out.flags.writeable = False
    return out


@lru_cache(maxsize=256)
def label_rows(n_labels: int, n_cols: int) -> np.ndarray:
    """[L, K]: each label's effect as a deviation from the mean over labels (the labels' indicator
    coefficients are the last L-1 columns; the first label is the reference). Cached and read-only:
    the per-content fits of ``dependence`` ask for the same few shapes hundreds of times a sweep."""
    g = np.zeros((n_labels, n_cols))
    g[1:, n_cols - n_labels + 1 :] = np.eye(n_labels - 1)
    rows = g - g.mean(axis=0)
    rows.flags.writeable = False
    return rows


def full_rank(x: np.ndarray) -> bool:
    """Whether x has full column rank. Cached by value: the designs depend on the offsets and labels
    only, so calibration asks about the same few matrices tens of thousands of times."""
    return x.shape[0] >= x.shape[1] and _full_rank(frozen(x))


@lru_cache(maxsize=1024)
def _full_rank(x: tuple) -> bool:
    x = thawed(x)
    return bool(np.linalg.matrix_rank(x) == x.shape[1])


def inflation(
    offset: np.ndarray,
    weight: np.ndarray,
    labels: np.ndarray,
    degree: int,
    component: np.ndarray | None = None,
    linear_se: np.ndarray | None = None,
) -> float:
    """Largest ratio of a label effect's standard error with this trend degree to its standard
    error with a linear trend (independent records; inf when not estimable). ``linear_se``: the
    latter (``label_se`` at degree 1) when the caller already has it (a loop over degrees)."""
    if linear_se is None:
        linear_se = label_se(offset, weight, labels, 1, component)
    return float(np.max(label_se(offset, weight, labels, degree, component) / linear_se))


def label_se(
    offset: np.ndarray, weight: np.ndarray, labels: np.ndarray, degree: int, component: np.ndarray | None = None
) -> np.ndarray:
    """[L] each label effect's standard error with this trend degree (independent records; inf
    when not estimable)."""
    n_labels = len(np.unique(labels))
    x = design(offset, degree, labels, component)
    if not full_rank(x):
        return np.full(n_labels, np.inf)
    rows = label_rows(n_labels, x.shape[1])
    cov = np.linalg.pinv(x.T @ (weight[:, None] * x), hermitian=True)
    return np.sqrt(np.maximum(np.einsum("lk,km,lm->l", rows, cov, rows), 1e-300))


def modulated(offset: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """[J, 2(L-1)]: the label indicators and the same indicators times the centred offset. In the
    lack-of-fit check the label effects may change linearly along the offsets (a phase effect
    that fades as accuracy nears its ceiling), so such a change is not mistaken for a drift
    the trend misses."""
    marks = dummies(labels)
    x = legendre(offset.astype(float), 1)
    return np.concatenate([marks, marks * x], axis=1)


def overlap(
    offset: np.ndarray, weight: np.ndarray, labels: np.ndarray, degree: int, component: np.ndarray | None = None
) -> float:
    """Largest canonical correlation between the look-ahead terms (Legendre degree+1 ..
    degree+LOOKAHEAD) and the label indicators, both with the trend removed (weighted). Near 1,
    a misfit that would leak into the label effects is invisible to the lack-of-fit test."""
    root = np.sqrt(weight)[:, None]
    trend = root * np.concatenate([intercepts(len(offset), component), legendre(offset, degree)], axis=1)
    resid = np.eye(len(offset)) - trend @ np.linalg.pinv(trend)
    ahead = resid @ (root * legendre(offset, degree + LOOKAHEAD)[:, degree:])
    marks = resid @ (root * dummies(labels))
    if np.linalg.matrix_rank(ahead) < ahead.shape[1] or np.linalg.matrix_rank(marks) < marks.shape[1]:
        return 1.0
    return float(np.linalg.svd(np.linalg.qr(ahead)[0].T @ np.linalg.qr(marks)[0], compute_uv=False)[0])


def max_separable_degree(
    offset: np.ndarray, weight: np.ndarray, labels: np.ndarray, component: np.ndarray | None = None
) -> int:
    """Largest degree whose label effects stay within MAX_INFLATION of a linear trend's and whose
    lack of fit can still be checked (look-ahead overlap at most MAX_OVERLAP); 0: none. Weights
    enter rounded to a quarter of their mean: the answer is a property of the design, computed
    once per design (calibration analyses thousands of sweeps with the same offsets)."""
    relative = np.round(4 * weight / weight.mean()) / 4
    groups = None if component is None else tuple(component.tolist())
    return _max_separable_degree(tuple(offset.tolist()), tuple(relative.tolist()), tuple(labels.tolist()), groups)


@lru_cache(maxsize=256)
def _max_separable_degree(offset: tuple, weight: tuple, labels: tuple, groups: tuple | None) -> int:
    offset, weight, labels = np.array(offset, dtype=float), np.array(weight), np.array(labels)
    component = None if groups is None else np.array(groups)
    best = 0
    linear_se = label_se(offset, weight, labels, 1, component)  # every degree's inflation is relative to it
    for k in range(1, len(offset)):
        if not full_rank(check_design(offset, k + LOOKAHEAD, labels, component)):
            break
        if (
            inflation(offset, weight, labels, k, component, linear_se) > MAX_INFLATION
            or overlap(offset, weight, labels, k, component) > MAX_OVERLAP
        ):
            break
        best = k
    return best


def cycles(offset: np.ndarray, labels: np.ndarray) -> int:
    """The fewest distinct offsets any label is seen at."""
    return min(len(np.unique(offset[labels == v])) for v in np.unique(labels))


def check_design(
    offset: np.ndarray, degree: int, labels: np.ndarray, component: np.ndarray | None = None
) -> np.ndarray:
    """[J, K]: the components' intercepts, Legendre 1..degree, modulated label indicators (the
    lack-of-fit model). Read-only, cached by value like ``design``."""
    return _check_design(frozen(offset), degree, frozen(labels), frozen(component))


@lru_cache(maxsize=128)
def _check_design(offset: tuple, degree: int, labels: tuple, component: tuple | None) -> np.ndarray:
    offset, labels, component = thawed(offset), thawed(labels), thawed(component)
    trend = np.concatenate([intercepts(len(offset), component), legendre(offset.astype(float), degree)], axis=1)
    out = np.concatenate([trend, modulated(offset, labels)], axis=1)
    out.flags.writeable = False
    return out


def lack_of_fit_p(fx: OffsetEffects, labels: np.ndarray, degree: int, upto: int) -> float:
    """Bootstrap p-value that Legendre terms degree+1..upto add nothing next to the (modulated) labels."""
    x = check_design(fx.offset, upto, labels, fx.component)
    fitted = linear(fx, wls_map(x, fx.weight), with_cov=False)
    terms = np.arange(fx.n_components + degree, fx.n_components + upto)
    se = fitted.se[terms]
    observed = float((safe_ratio(fitted.theta[terms], se) ** 2).sum())
    null = (safe_ratio(fitted.boot[:, terms], se[None]) ** 2).sum(axis=1)
    return bootstrap_p(null, observed)


def stability_p(fx: OffsetEffects, labels: np.ndarray, degree: int, top: int) -> float:
    """Bootstrap p-value that the label effects with this trend degree equal those with the most
    flexible separable trend (``top``): a misfit of the smaller trend that leaks into the label
    effects shows as a difference between the two, whatever the labels' own effects are."""
    if degree >= top:
        return 1.0

    def effects_map(k: int) -> np.ndarray:
        x = design(fx.offset, k, labels, fx.component)
        return label_rows(len(np.unique(labels)), x.shape[1]) @ wls_map(x, fx.weight)

    diff = linear(fx, effects_map(degree) - effects_map(top), with_cov=False)
    observed = float((safe_ratio(diff.theta, diff.se) ** 2).sum())
    null = (safe_ratio(diff.boot, diff.se[None]) ** 2).sum(axis=1)
    return bootstrap_p(null, observed)


def floor_degree(top: int) -> int:
    """The least flexible trend tried: half the largest separable degree. A trend that is too simple
    for the drift is what leaks, and the checks below cannot see every leak (measured: at 48
    offsets a 60 pp logistic fall gave 8-9 % false gaps when degrees from 1 up were tried, 5-6 %
    at any fixed degree of 12 or more); the extra flexibility costs at most a few percent of the
    phase effects' standard error."""
    return max(1, (top + 1) // 2)


def default_degree(n_offsets: int, n_labels: int, top: int) -> int:
    """Unchecked fallback (too few contents to test a lack of fit): one degree per window."""
    return max(1, min(top, n_offsets // max(n_labels, 2)))


def select_trend(fx: OffsetEffects, labels: np.ndarray, what: str = "phase", fixed: int | None = None) -> TrendChoice:
    """The trend degree for stage-2 effects of ``labels`` [J] (one per column); ``what`` names a
    label in notes ("phase", "residue mod 5")."""
    n_labels = len(np.unique(labels))
    top = max_separable_degree(fx.offset, fx.weight, labels, fx.component)
    seen = cycles(fx.offset, labels)
    if seen < MIN_CYCLES:
        note = (
            f"some {what} is seen at only {seen} offset{'s' if seen != 1 else ''}: a drift over offsets cannot be "
            f"told from a pattern that repeats with fewer than {MIN_CYCLES} cycles (offsets must span {MIN_CYCLES} "
            "windows or more)"
        )
        return TrendChoice(None, False, None, top, note=note)
    if top < 1:
        note = f"with these offsets not even a linear drift can be checked next to the {what} effects (add offsets)"
        return TrendChoice(None, False, None, top, note=note)
    if fixed is not None:
        return TrendChoice(fixed, False, None, top, note=f"trend degree fixed at {fixed} by the caller")
    if not fx.inference:
        degree = default_degree(len(fx.offset), n_labels, top)
        return TrendChoice(degree, False, None, top, note="too few contents to check the trend: degree not data-chosen")
    tried = []
    for k in range(floor_degree(top), top + 1):
        tried.append((k, lack_of_fit_p(fx, labels, k, k + LOOKAHEAD), stability_p(fx, labels, k, top)))
        if min(tried[-1][1:]) > CHECK_LEVEL:
            return TrendChoice(k, True, min(tried[-1][1:]), top, tried)
    best = max(tried, key=lambda row: min(row[1:]))
    return TrendChoice(top, False, min(best[1:]), top, tried, _misfit_note(what, top, len(tried), min(best[1:])))


def _misfit_note(what: str, top: int, n_tried: int, p: float) -> str:
    """Why no trend passed its checks, as far as the data can say: with one checkable degree a
    misfit at p near ACCEPT_LEVEL is as often chance (a null sweep fails it in 1 of 10) as structure."""
    if n_tried == 1 and p > 0.001:
        return (
            f"with these offsets only a degree-{top} drift can be checked next to the {what} effects, and its check "
            f"failed ({p_text(p)}): by chance (a check at level {CHECK_LEVEL:g} fails in 1 of "
            f"{round(1 / CHECK_LEVEL)} sweeps without any structure) or a drift or pattern it does not fit -- these "
            "offsets cannot tell which; more windows of the step (e.g. twice the offsets) allow a more flexible, "
            "checkable drift"
        )
    return (
        f"the offsets show structure that neither a smooth drift nor {what} effects explain (a drift too steep "
        f"for these offsets, or a pattern of another period): even the most flexible trend that keeps them apart "
        f"(degree {top}) misfits (largest check {p_text(p)})"
    )
