"""Statistics on sweep records only (DESIGN.md §3): never imports a model or a backend.

Shape legend: C content groups, D offsets, P phases, R resamples / permutations.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import f as f_dist
from scipy.stats import norm

REQUIRED = ("content_id", "offset", "phase", "step", "correct", "logprob_target", "logprobs")


def wilson(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion."""
    if n == 0:
        return (math.nan, math.nan)
    z = norm.ppf(0.5 + level / 2)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def check_records(records: list[dict]) -> None:
    if not records:
        raise ValueError("no records to analyze (records.jsonl is empty)")
    for name in REQUIRED:
        missing = sum(name not in r for r in records)
        if missing:
            raise ValueError(
                f"{missing} of {len(records)} records lack the field {name!r}; every record needs {REQUIRED}"
            )
    steps = {r["step"] for r in records}
    if len(steps) != 1:
        raise ValueError(f"records mix compression steps {sorted(steps)}; analyze one step at a time")


class Table:
    """Records as aligned arrays: one row per (content, offset)."""

    def __init__(self, records: list[dict]):
        check_records(records)
        records = sorted(records, key=lambda r: (r["content_id"], r["offset"]))
        self.step = records[0]["step"]
        self.contents = np.array(sorted({r["content_id"] for r in records}))
        self.offsets = np.array(sorted({r["offset"] for r in records}))
        c_index = {c: i for i, c in enumerate(self.contents)}
        d_index = {d: i for i, d in enumerate(self.offsets)}
        shape = (len(self.contents), len(self.offsets))
        self.correct = np.full(shape, np.nan)
        self.phase = np.full(shape, -1, dtype=np.int64)
        self.logprob = np.full(shape, np.nan)
        self.margin = np.full(shape, np.nan)
        self.same_window = np.full(shape, np.nan)
        for r in records:
            i, j = c_index[r["content_id"]], d_index[r["offset"]]
            self.correct[i, j] = float(r["correct"])
            self.phase[i, j] = r["phase"]
            self.logprob[i, j] = r["logprob_target"]
            target = r.get("target", "right")
            others = [v for k, v in r["logprobs"].items() if v is not None and k != target]
            self.margin[i, j] = r["logprob_target"] - max(others) if others else np.nan
            if r.get("same_window") is not None:
                self.same_window[i, j] = float(r["same_window"])
        self.complete = not np.isnan(self.correct).any()


def per_phase(t: Table) -> list[dict]:
    rows = []
    for p in range(t.step):
        mask = t.phase == p
        y = t.correct[mask]
        y = y[~np.isnan(y)]
        low, high = wilson(int(y.sum()), len(y))
        rows.append(
            {
                "phase": p,
                "n": int(len(y)),
                "accuracy": float(y.mean()) if len(y) else math.nan,
                "ci_low": low,
                "ci_high": high,
                "mean_logprob": float(np.nanmean(t.logprob[mask])) if len(y) else math.nan,
                "mean_margin": float(np.nanmean(t.margin[mask]))
                if len(y) and not np.isnan(t.margin[mask]).all()
                else None,
            }
        )
    return rows


def _phase_sums(t: Table) -> tuple[np.ndarray, np.ndarray]:
    """Per content: successes [C,P] and counts [C,P]."""
    successes = np.zeros((len(t.contents), t.step))
    counts = np.zeros((len(t.contents), t.step))
    for p in range(t.step):
        mask = (t.phase == p) & ~np.isnan(t.correct)
        successes[:, p] = np.where(mask, t.correct, 0).sum(axis=1)
        counts[:, p] = mask.sum(axis=1)
    return successes, counts


def _rates(successes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return successes / counts


def _spread(acc: np.ndarray) -> np.ndarray:
    """max - min over the last (phase) axis, ignoring phases without records."""
    return np.nanmax(acc, axis=-1) - np.nanmin(acc, axis=-1)


def _gap(successes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """max - min phase accuracy for each row of weights ([R,P] sums)."""
    return _spread(_rates(successes, counts))


def _permutation_p(null: np.ndarray, observed, n_perm: int) -> float:
    """Share of the null at or above the observed value, counting the observation itself."""
    return float((1 + np.sum(null >= observed - 1e-12)) / (1 + n_perm))


def gap_with_ci(t: Table, rng: np.random.Generator, n_boot: int = 2000) -> tuple[float, tuple[float, float]]:
    """Gap (pp) and its paired bootstrap 95% CI, resampling content groups."""
    successes, counts = _phase_sums(t)
    observed = float(_gap(successes.sum(0), counts.sum(0)))
    weights = rng.multinomial(len(t.contents), np.full(len(t.contents), 1 / len(t.contents)), size=n_boot)
    boot = _gap(weights @ successes, weights @ counts)
    low, high = np.nanpercentile(boot, [2.5, 97.5])
    return 100 * observed, (100 * float(low), 100 * float(high))


def _shuffled_within_rows(x: np.ndarray, rng: np.random.Generator, n_perm: int) -> np.ndarray:
    """``n_perm`` copies of x [C,D], each row (content group) permuted on its own: [R,C,D]."""
    order = np.argsort(rng.random((n_perm, *x.shape)), axis=-1)
    return np.take_along_axis(np.broadcast_to(x, order.shape), order, axis=-1)


def permutation_tests(t: Table, rng: np.random.Generator, n_perm: int = 2000) -> tuple[float, float]:
    """p-values for the gap and for homogeneity (between-phase variance of accuracy), phase
    labels shuffled within content groups."""
    y = np.nan_to_num(t.correct)
    valid = ~np.isnan(t.correct)

    def stats(phases: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        onehot = phases[..., None] == np.arange(t.step)  # [...,C,D,P]
        succ = (onehot * (y * valid)[..., None]).sum(axis=(-3, -2))
        cnt = (onehot * valid[..., None]).sum(axis=(-3, -2))
        acc = _rates(succ, cnt)
        return _spread(acc), np.nanvar(acc, -1)

    gap_obs, var_obs = stats(t.phase)
    gap_null, var_null = [], []
    for chunk in range(0, n_perm, 250):
        g, v = stats(_shuffled_within_rows(t.phase, rng, min(250, n_perm - chunk)))
        gap_null.append(g)
        var_null.append(v)
    gap_null, var_null = np.concatenate(gap_null), np.concatenate(var_null)
    return _permutation_p(gap_null, gap_obs, n_perm), _permutation_p(var_null, var_obs, n_perm)


def _detrend(acc_by_offset: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Residual after a least-squares line over offsets: a drift with the needle's distance to
    the query (shift-needle) is not a period."""
    x = (offsets - offsets.mean()) / max(offsets.std(), 1e-12)
    centred = acc_by_offset - acc_by_offset.mean(-1, keepdims=True)
    slope = (centred * x).sum(-1, keepdims=True) / (x * x).sum()
    return centred - slope * x


def _explained(acc_by_offset: np.ndarray, offsets: np.ndarray, periods: list[int]) -> np.ndarray:
    """Fraction of the (detrended) variance over offsets explained by offset mod P: [..., len(periods)]."""
    centred = _detrend(acc_by_offset, offsets)
    total = (centred**2).sum(-1)
    out = []
    for period in periods:
        groups = offsets % period
        between = np.zeros_like(total)
        for g in range(period):
            member = groups == g
            between += member.sum() * centred[..., member].mean(-1) ** 2
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(np.where(total > 0, between / total, 0.0))
    return np.stack(out, -1)


def _adjusted(r2: np.ndarray, n: int, periods: list[int]) -> np.ndarray:
    """Adjusted R²: a period with more groups explains more by chance alone (one more
    degree of freedom went to the trend)."""
    dof = np.array([n - p - 1 for p in periods], dtype=float)
    return 1 - (1 - r2) * (n - 2) / dof


def detect_period(t: Table, rng: np.random.Generator, n_perm: int = 2000, alpha: float = 0.05) -> dict:
    """Candidate periods 2..D/2, on accuracy by offset after removing a linear trend.
    Test: the largest adjusted R² against its permutation null
    (offsets shuffled within content groups), which controls the false-positive rate over all
    candidates at once. If significant, report the smallest divisor of the best period that the
    best does not beat in a nested F-test (8 explains everything 4 does, and no more)."""
    n = len(t.offsets)
    periods = [p for p in range(2, n // 2 + 1)]
    if not periods or not t.complete:
        return {
            "detected": None,
            "p_value": None,
            "explained": {},
            "note": "needs a complete sweep of >= 4 offsets",
        }
    y = t.correct  # [C,D]
    observed_r2 = _explained(y.mean(0), t.offsets, periods)
    observed_adj = _adjusted(observed_r2, n, periods)
    null_max = []
    for chunk in range(0, n_perm, 250):
        shuffled = _shuffled_within_rows(y, rng, min(250, n_perm - chunk)).mean(1)  # [R,D]
        null_max.append(_adjusted(_explained(shuffled, t.offsets, periods), n, periods).max(-1))
    null_max = np.concatenate(null_max)
    best = float(observed_adj.max())
    p_value = _permutation_p(null_max, best, n_perm)
    explained = {int(p): float(r) for p, r in zip(periods, observed_r2, strict=True)}
    detected = None
    if p_value < alpha:
        adj = dict(zip(periods, observed_adj, strict=True))
        top = max(adj, key=adj.get)
        detected = next(q for q in periods if top % q == 0 and _nested_f_p(explained, q, top, n) > alpha)
    return {"detected": detected, "p_value": p_value, "explained": explained}


def _nested_f_p(r2: dict, small: int, large: int, n: int) -> float:
    """F-test p-value that grouping by d mod ``large`` explains more than by d mod ``small``
    (a divisor of it, so the models are nested); 1.0 when they are the same period."""
    if small == large:
        return 1.0
    dof_extra, dof_rest = large - small, n - large - 1
    residual = max(1 - r2[large], 1e-12)
    f_stat = ((r2[large] - r2[small]) / dof_extra) / (residual / dof_rest)
    return float(f_dist.sf(f_stat, dof_extra, dof_rest))


def window_breakdown(t: Table) -> dict | None:
    if np.isnan(t.same_window).all():
        return None
    out = {}
    for name, flag in (("same_window", 1.0), ("split_window", 0.0)):
        mask = t.same_window == flag
        y = t.correct[mask]
        low, high = wilson(int(y.sum()), len(y))
        out[name] = {
            "n": int(len(y)),
            "accuracy": float(y.mean()) if len(y) else None,
            "ci_low": low,
            "ci_high": high,
        }
    return out


def analyze_records(records: list[dict], seed: int = 0, n_resamples: int = 2000) -> dict:
    """metrics.json content from records alone."""
    t = Table(records)
    rng = np.random.default_rng(seed)
    gap, gap_ci = gap_with_ci(t, rng, n_resamples)
    p_gap, p_homogeneity = permutation_tests(t, rng, n_resamples)
    return {
        "step": t.step,
        "n_records": int((~np.isnan(t.correct)).sum()),
        "n_contents": len(t.contents),
        "offsets": [int(d) for d in t.offsets],
        "overall_accuracy": float(np.nanmean(t.correct)),
        "phases": per_phase(t),
        "gap_pp": gap,
        "gap_ci_pp": list(gap_ci),
        "gap_p_value": p_gap,
        "homogeneity_p_value": p_homogeneity,
        "period": detect_period(t, rng, n_resamples),
        "accuracy_by_offset": [float(x) for x in np.nanmean(t.correct, axis=0)],
        # the phase at each offset when it is the same for every content (aligned probes), else null
        "phase_by_offset": [int(col[0]) if (col == col[0]).all() else None for col in t.phase.T],
        "windows": window_breakdown(t),
    }
