"""Where the phase lives: the needle's, the prompt end's or their distance's (docs/design.md,
'Where the phase lives'; docs/sweeps.md, 'Statistics by factor').

Every record has three phases at step s: the needle's ``n = (anchor_pos - align) mod s`` (the
record's ``phase``), the prompt end's ``m = (answer_pos - align) mod s`` (where the prompt stops in
its compression window: a serving stack's last, partial window) and their distance's
``k = (m - n) mod s``. A design moves some of them with the offset and holds the others
(``probes/designs.py``); which can be told apart is read from the records, not from the design's
name:

* a factor **moves** when some content is seen at two of its phases;
* two moving factors are **tied** when, within every content, each determines the other
  (shift-needle ties the needle and the distance): they are tested as one, and a claim names both;
* a factor **held** within every content may still differ *between* contents (a text haystack's
  prompt length differs per content): it is then compared between contents.

**Within contents** (each group of tied factors), one linear probability model on the records,
contents as fixed effects and clusters::

    correct = alpha[content] + sum_j b_j P_j(offset) + c * answer_pos + sum_groups g[phase] + noise

``P_j``: the Legendre trend over offsets of the degree the phase statistics chose (``trend``);
``answer_pos`` (linear) where the prompt end moves apart from the offset (the crossed design's
draw lengthens the distance by up to 2s - 2 tokens). Each group's phase effects are tested with
the cluster-robust Wald statistic, its null from the wild cluster bootstrap (Webb weights,
studentized), as the homogeneity test. The three factors' effects are identifiable together in
a crossed design: on the s x s grid of (n, m), functions of n, of m and of m - n span different
Fourier modes.

**Between contents** (a held factor that differs between contents): each content's accuracy over
all its records, compared across the factor's phases by a permutation test over contents (the
between-phase sum of squares; labels shuffled across contents). It assumes what a randomized
haystack gives: a content's phase is not tied to its difficulty. The drift over offsets is
common to all contents and cancels.

Shape legend: N records, C contents, K regressors, B bootstrap draws, L phases of a factor.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import chi2

from phasescope.analysis.cluster_ols import bootstrap_p, critical_value, fit, full_rank, studentized, within
from phasescope.analysis.intervals import t_quantile
from phasescope.analysis.offset_effects import MIN_CONTENTS
from phasescope.analysis.phase_effects import WALD_TOL, _wald, pairwise, range_bounds
from phasescope.analysis.pvalue import p_text
from phasescope.analysis.records import RecordArrays
from phasescope.analysis.trend import legendre
from phasescope.phases import FACTORS as TABLE
from phasescope.phases import candidate_periods
from phasescope.phases import words as group_words

FACTORS = tuple(TABLE)
N_PERMUTATIONS = 2000


def factor_phases(r: RecordArrays) -> dict[str, np.ndarray] | None:
    """[N] each record's phase of each factor at the step (None: the records lack answer_pos or align)."""
    if r.end_phase is None:
        return None
    return {"needle": r.phase, "end": r.end_phase, "distance": (r.end_phase - r.phase) % r.step}


def factor_positions(r: RecordArrays) -> tuple[dict[str, np.ndarray], list[int]] | None:
    """[N] each factor's position (``phases.Factor.position``) and the periods it can be read at:
    every candidate period (``phases.candidate_periods``) when the records carry the needle's
    position, else only the step's divisors (the needle's position is then known modulo the step,
    through its phase). None: the records do not say where the prompt ends."""
    if r.end_phase is None or r.answer_pos is None:
        return None
    end = r.answer_pos - r.align
    if r.anchor_pos is None:
        periods = [p for p in candidate_periods(r.step) if r.step % p == 0]
        return {"needle": r.phase, "end": end, "distance": end - r.phase}, periods
    return {name: f.position(r.anchor_pos, r.answer_pos, r.align) for name, f in TABLE.items()}, candidate_periods(
        r.step
    )


def _distinct(*columns: np.ndarray) -> int:
    return len(np.unique(np.stack(columns, axis=1), axis=0))


def layout(r: RecordArrays, phases: dict[str, np.ndarray]) -> dict:
    """Which factors move within contents, which are tied, which are held (and whether they
    differ between contents).

    Two moving factors are tied when one determines the other by the same map in every content
    (native ids under shift-needle: needle phase n, distance phase k0 - n for one k0). When the
    map differs between contents (a text haystack: each content's prompt ends at its own phase),
    the contents whose maps differ tell the two apart, and each is tested on its own."""
    moving = [f for f in FACTORS if _distinct(r.content, phases[f]) > _distinct(r.content)]
    groups: list[list[str]] = []
    for f in moving:
        for group in groups:
            g = group[0]
            if _distinct(phases[f], phases[g]) == _distinct(phases[f]) == _distinct(phases[g]):
                group.append(f)
                break
        else:
            groups.append([f])
    if len(groups) == 3:  # the third is a function of the other two: all three only when all move apart
        groups = groups if len(moving) == 3 else groups[:2]
    held = {}
    for f in FACTORS:
        if f not in moving:
            values = np.unique(phases[f])
            held[f] = int(values[0]) if len(values) == 1 else None  # None: differs between contents
    return {"groups": groups, "held": held}


def factor_statistics(
    r: RecordArrays,
    trend_degree: int | None,
    rng: np.random.Generator,
    n_boot: int,
    trend_note: str | None = None,
    shape: dict | None = None,
) -> dict | None:
    """metrics.json's ``factors`` (None when the records do not say where the prompt ends);
    ``shape``: their ``layout`` when the caller has it already. Each test is made at every
    candidate period its factor can be read at (``factor_positions``) and names the one its
    data pick (``period``)."""
    phases, read = factor_phases(r), factor_positions(r)
    if phases is None or read is None:
        return None
    positions, periods = read
    shape = shape or layout(r, phases)
    informative = _informative(r)
    tests = []
    if shape["groups"]:
        tests += _within(r, positions, periods, shape["groups"], trend_degree, rng, n_boot, informative, trend_note)
    for f, value in shape["held"].items():
        if value is None:
            tests.append(_between(r, positions[f], periods, f, rng))
    return {
        "groups": shape["groups"],
        "held": {f: v for f, v in shape["held"].items()},
        "align": r.align,
        "step": r.step,
        "periods": periods,
        "n_informative_contents": informative,
        "cells": cell_counts(r.step, [phases[g[0]] for g in shape["groups"]]),
        "grid": needle_end_grid(r, phases, shape),
        "tests": tests,
        "model": "linear probability model with content fixed effects, the phase statistics' trend over offsets "
        "and answer_pos; each factor's residues modulo every candidate period tested by a cluster-robust Wald "
        "statistic, the smallest chi-square p over the periods referred to the wild cluster bootstrap's; "
        "factors held within contents compared between contents by a permutation test",
    }


def cell_counts(step: int, columns: list[np.ndarray]) -> dict | None:
    """Records in the fewest and the most filled cell of the moving groups' phases crossed (None with
    one group). With uneven cells one factor's phase statistics, read alone, carry part of another's
    effect: the verdict names the cells' spread beside such a reading."""
    if len(columns) < 2:
        return None
    code = np.zeros(len(columns[0]), dtype=np.int64)
    for column in columns:
        code = code * step + column % step
    counts = np.bincount(code, minlength=step ** len(columns))
    return {"min": int(counts.min()), "max": int(counts.max()), "n_cells": len(counts)}


def needle_end_grid(r: RecordArrays, phases: dict[str, np.ndarray], shape: dict) -> dict | None:
    """Raw accuracy (records pooled, drift not removed) in each (needle phase, prompt-end phase)
    cell, for the heatmap of a design that moves the two apart within contents (None: one of them
    is held, or they are tied). ``accuracy`` [needle][end]: None where a cell has no record."""
    group = {f: i for i, members in enumerate(shape["groups"]) for f in members}
    if "needle" not in group or "end" not in group or group["needle"] == group["end"]:
        return None
    needle, end = phases["needle"] % r.step, phases["end"] % r.step
    code = needle * r.step + end
    n = np.bincount(code, minlength=r.step**2).reshape(r.step, r.step)
    k = np.bincount(code, weights=r.correct, minlength=r.step**2).reshape(r.step, r.step)
    accuracy = [[float(k[i, j] / n[i, j]) if n[i, j] else None for j in range(r.step)] for i in range(r.step)]
    return {"accuracy": accuracy, "n": n.tolist()}


def _informative(r: RecordArrays) -> int:
    """Contents whose outcome is not the same at every record (any outcome: 0/1, or a difference)."""
    low = np.full(r.n_contents, np.inf)
    high = np.full(r.n_contents, -np.inf)
    np.minimum.at(low, r.content, r.correct)
    np.maximum.at(high, r.content, r.correct)
    return int((high > low).sum())


def _class_rows(r: RecordArrays, labels: np.ndarray, period: int) -> list[dict]:
    """Records and accuracy per residue of ``labels`` modulo ``period``."""
    residue = labels % period
    rows = []
    for p in np.unique(residue):
        mask = residue == p
        rows.append({"phase": int(p), "n": int(mask.sum()), "accuracy": float(r.correct[mask].mean())})
    return rows


def _moving(r: RecordArrays, labels: np.ndarray, period: int) -> bool:
    return _distinct(r.content, labels % period) > _distinct(r.content)


def _design(r: RecordArrays, positions: dict, groups: list[list[str]], degree: int, period: int):
    """The within-contents regressors with every group's residues modulo ``period`` (level 0 the
    reference): (x [N,K], the groups' column slices, their levels), or None when not full rank."""
    blocks, slices, levels_of = [legendre(r.offset.astype(float), max(degree, 1))], [], []
    for g in groups:
        labels = positions[g[0]] % period
        levels = np.unique(labels)
        start = sum(b.shape[1] for b in blocks)
        blocks.append((labels[:, None] == levels[None, 1:]).astype(float))
        slices.append(slice(start, start + len(levels) - 1))
        levels_of.append(levels)
    weight = np.ones(len(r.correct))
    base = within(np.concatenate(blocks, axis=1), r.content, weight, r.n_contents)
    ends = within(r.answer_pos.astype(float)[:, None], r.content, weight, r.n_contents)
    x = np.concatenate([base, ends], axis=1)
    if not full_rank(x, weight):  # the prompt end moves with the offset (shift-end, pad-prefix): no term of its own
        x = base
    if not full_rank(x, weight):
        return None
    return x, slices, levels_of


def _within(r, positions, periods, groups, degree, rng, n_boot, informative, trend_note) -> list[dict]:
    """One model for every group of tied factors, each group's residues modulo the longest period
    its data can carry (else the step); a test per group over the candidate periods."""
    name = lambda group: "+".join(group)  # noqa: E731
    empty = [_test(name(g), g, "within", _class_rows(r, positions[g[0]], r.step)) for g in groups]
    if degree is None:
        for t in empty:
            t["note"] = "not tested: " + (trend_note or "the drift over offsets could not be separated from the phases")
        return empty
    layout_ = None
    for longest in sorted({periods[-1], r.step}, reverse=True):
        layout_ = _design(r, positions, groups, degree, longest)
        if layout_ is not None:
            break
    if layout_ is None:
        for t in empty:
            t["note"] = "not tested: the factors' phases are not all seen apart from the drift within contents"
        return empty
    x, slices, levels_of = layout_
    y = within(r.correct, r.content, np.ones(len(r.correct)), r.n_contents)
    model = fit(x, y, np.ones(len(r.correct)), r.content, r.n_contents)
    cov = model.covariance
    draws = list(model.draws(rng, n_boot)) if informative >= MIN_CONTENTS and n_boot > 0 else []
    out = []
    for t, g, sl, levels in zip(empty, groups, slices, levels_of, strict=True):
        longest = int(levels.max()) + 1 if len(levels) else r.step
        tried = [p for p in periods if longest % p == 0 and _moving(r, positions[g[0]], p)] or [r.step]
        bases = {p: _class_basis(levels, p) for p in tried}
        period = tried[-1]
        if draws:
            period = _shortest_explaining(model.beta[sl], cov[sl, sl], draws, sl, levels, period, tried)
        t["period"], t["periods"] = period, tried
        t["phases"] = _class_rows(r, positions[g[0]], period)
        means = _class_means(levels, period)
        _effects(t, means @ _level_rows(len(levels)), model.beta[sl], cov[sl, sl], r.n_contents)
        if _unidentified(t):
            out.append(t)
            continue
        if draws:
            t["p_value"] = _min_p_value(model.beta[sl], cov[sl, sl], draws, sl, [bases[p] for p in tried])
            t["range_ci_pp"] = _range_interval(means @ _level_rows(len(levels)), model.beta[sl], cov[sl, sl], draws, sl)
        else:
            t["note"] = f"no p-value under {MIN_CONTENTS} contents whose answers vary ({informative})"
        out.append(t)
    return out


def _unidentified(t: dict) -> bool:
    """Two classes more than 100 pp apart cannot be a difference of accuracies: the factor's classes
    and the drift are (near) collinear at these offsets (seen: a mod-16 needle pattern against the
    trend over 64 offsets, effects of +-900 pp; mod-4 needle ranges of 106-138 pp at step 2). Its
    effects are then withheld, never reported."""
    effects = [row["effect_pp"] for row in t["phases"]]
    if max(effects) - min(effects) <= 100.0 + 1e-6:  # exactly 100: one class always right, one never
        return False
    for row in t["phases"]:
        row["effect_pp"], row["effect_ci_pp"] = None, None
    t["range_pp"] = t["worst_phase"] = t["best_phase"] = None
    t["note"] = (
        f"not tested: its classes mod {t['period']} cannot be told from the drift over these offsets "
        "(collinear: classes more than 100 pp apart); sweep more offsets"
    )
    return True


def _test(name: str, members: list[str], kind: str, rows: list[dict]) -> dict:
    return {"name": name, "members": members, "kind": kind, "phases": rows, "range_pp": None, "range_ci_pp": None,
            "p_value": None, "worst_phase": None, "best_phase": None, "note": None, "period": None,
            "periods": []}  # fmt: skip


def _class_means(levels: np.ndarray, period: int) -> np.ndarray:
    """[P', L] the mean over each residue class modulo ``period`` (P' classes seen) of the L levels."""
    classes = np.unique(levels % period)
    means = (levels[None, :] % period == classes[:, None]).astype(float)
    return means / means.sum(axis=1, keepdims=True)


def _class_basis(levels: np.ndarray, period: int) -> np.ndarray:
    """[R, L-1] an orthonormal basis of the residue-class pattern modulo ``period`` as contrasts of
    the level coefficients: R = classes - 1 directions, each a difference of class means."""
    pattern = _class_means(levels, period) @ _level_rows(len(levels))  # [P', L-1], centred over classes
    u, sv, vt = np.linalg.svd(pattern, full_matrices=False)
    return vt[sv > 1e-9 * max(sv.max(initial=0.0), 1e-300)]


def _min_p_statistic(beta: np.ndarray, cov: np.ndarray, basis: np.ndarray) -> float:
    """-log of the chi-square p of the Wald statistic of ``basis @ beta`` (one period's pattern)."""
    if len(basis) == 0:
        return 0.0
    wald = _wald(basis @ beta, basis @ cov @ basis.T)
    return float(-chi2.logsf(wald, len(basis)))


def _min_p_value(beta, cov, draws, sl, bases) -> float:
    """Bootstrap p of the largest -log chi-square p over the periods' patterns (the smallest p),
    each draw's statistic the same: a period's own tail is never read alone, so trying several
    periods costs no false claims (``phase_effects._wald``: a direction with no spread and no effect
    -- a deterministic server's untouched factor -- adds nothing)."""
    observed = max(_min_p_statistic(beta, cov, b) for b in bases)
    null = []
    for delta, covs in draws:
        d, c = delta[:, sl], covs[:, sl, sl]
        per = [-chi2.logsf(_wald(d @ b.T, np.einsum("rk,nkl,ql->nrq", b, c, b)), len(b)) for b in bases if len(b)]
        null.append(np.max(per, axis=0) if per else np.zeros(len(d)))
    return bootstrap_p(np.concatenate(null), observed, tol=WALD_TOL)


NAMING_ALPHA = 0.05  # a longer period is named only when it explains significantly more than a divisor


def _shortest_explaining(beta, cov, draws, sl, levels, best: int, tried: list[int]) -> int:
    """The shortest tried divisor of ``best`` (the longest period tried) that ``best`` does not
    beat: the part of ``best``'s pattern beyond it has a bootstrap Wald p of at least
    NAMING_ALPHA. A fault at prompt length ≡ 3 mod 4 then reads 'mod 4' even where noise makes the
    residues mod 8 fit best, and one at ≡ 5 mod 8 reads 'mod 8', not '≡ 1 mod 4'."""
    for p in sorted(q for q in tried if q < best and best % q == 0):
        beyond = _beyond_basis(levels, p, best)
        if len(beyond) == 0:
            return p
        observed = float(_wald(beyond @ beta, beyond @ cov @ beyond.T))
        null = np.concatenate(
            [_wald(d[:, sl] @ beyond.T, np.einsum("rk,nkl,ql->nrq", beyond, c[:, sl, sl], beyond)) for d, c in draws]
        )
        if bootstrap_p(null, observed, tol=WALD_TOL) >= NAMING_ALPHA:
            return p
    return best


def _beyond_basis(levels: np.ndarray, shorter: int, longer: int) -> np.ndarray:
    """[R, L-1] an orthonormal basis of the pattern modulo ``longer`` beyond the one modulo ``shorter``."""

    def spread(period: int) -> np.ndarray:  # [L, L] each level -> the mean of its class
        classes = np.unique(levels % period)
        member = (levels[:, None] % period == classes[None, :]).astype(float)
        return member @ _class_means(levels, period)

    pattern = (spread(longer) - spread(shorter)) @ _level_rows(len(levels))
    _, sv, vt = np.linalg.svd(pattern, full_matrices=False)
    return vt[sv > 1e-9 * max(sv.max(initial=0.0), 1e-300)]


def _effects(t: dict, rows: np.ndarray, beta: np.ndarray, cov: np.ndarray, n_contents: int) -> None:
    """Each class's effect (``rows @ beta``: a deviation from the mean over classes) with a t interval
    over contents."""
    effect = rows @ beta
    se = np.sqrt(np.maximum(np.einsum("lk,km,lm->l", rows, cov, rows), 0.0))
    t_crit = t_quantile(0.975, max(n_contents - 1, 1))
    for row, e, s in zip(t["phases"], effect, se, strict=True):
        row["effect_pp"] = 100 * float(e)
        row["effect_ci_pp"] = [100 * float(e - t_crit * s), 100 * float(e + t_crit * s)]
    t["range_pp"] = 100 * float(effect.max() - effect.min())
    t["worst_phase"] = t["phases"][int(np.argmin(effect))]["phase"]
    t["best_phase"] = t["phases"][int(np.argmax(effect))]["phase"]


def _level_rows(n_levels: int) -> np.ndarray:
    """[L, L-1] each level's effect, centred over levels, from the coefficients of levels 1.. (level 0
    the reference)."""
    rows = np.zeros((n_levels, n_levels - 1))
    rows[1:] = np.eye(n_levels - 1)
    return rows - rows.mean(axis=0)


def _range_interval(rows: np.ndarray, beta: np.ndarray, cov: np.ndarray, draws: list, sl: slice) -> list[float]:
    """95% interval of the factor's max - min class effect, pp, as the gap's (``range_bounds``
    at the bootstrap's max-|t| over every pairwise class contrast)."""
    pairs = pairwise(rows)  # [Q,L-1]
    max_t = np.concatenate([np.abs(studentized(pairs, d[:, sl], c[:, sl, sl])).max(axis=1) for d, c in draws])
    return [100 * v for v in range_bounds(pairs, beta, cov, float(critical_value(max_t)))]


def _between(r: RecordArrays, labels: np.ndarray, periods: list[int], factor: str, rng: np.random.Generator) -> dict:
    """A factor held within contents, different between them: contents' accuracies by its residue
    modulo each candidate period, the largest between-class spread per degree of freedom over the
    periods referred to its permutation distribution (contents' labels shuffled)."""
    total = np.bincount(r.content, minlength=r.n_contents)
    seen = total > 0
    accuracy = np.bincount(r.content, weights=r.correct, minlength=r.n_contents)[seen] / total[seen]
    label = np.zeros(r.n_contents, dtype=np.int64)
    label[r.content] = labels
    label = label[seen]
    tried = [p for p in periods if len(np.unique(label % p)) > 1] or [r.step]
    period = tried[-1]
    if seen.sum() >= MIN_CONTENTS and accuracy.min() < accuracy.max():
        period = _shortest_between(accuracy, label, tried, rng)
    residue = label % period
    levels = np.unique(residue)
    rows = [
        {"phase": int(p), "n_contents": int((residue == p).sum()), "accuracy": float(accuracy[residue == p].mean())}
        for p in levels
    ]
    t = _test(factor, [factor], "between", rows)
    t["period"], t["periods"] = period, tried
    mean = float(accuracy.mean())
    for row in rows:
        row["effect_pp"] = 100 * (row["accuracy"] - mean)
    effects = [row["effect_pp"] for row in rows]
    t["range_pp"] = max(effects) - min(effects)
    t["worst_phase"], t["best_phase"] = rows[int(np.argmin(effects))]["phase"], rows[int(np.argmax(effects))]["phase"]
    t["n_contents"] = int(seen.sum())
    if seen.sum() < MIN_CONTENTS:
        t["note"] = f"no p-value under {MIN_CONTENTS} contents"
        return t
    if accuracy.min() == accuracy.max():
        t["p_value"] = 1.0
        return t
    t["p_value"] = _permutation_p(accuracy, label, tried, rng)
    return t


def _shortest_between(accuracy: np.ndarray, label: np.ndarray, tried: list[int], rng: np.random.Generator) -> int:
    """The shortest tried divisor of the longest period that the longest does not beat between
    contents: the spread of the longest period's classes, with the contents' labels shuffled
    within each class of the shorter period (what the shorter period alone would give), has a
    permutation p of at least NAMING_ALPHA."""
    longest = tried[-1]
    for p in sorted(q for q in tried if q < longest and longest % q == 0):
        observed = float(_spread(accuracy, label % longest)[0])
        shuffled = np.stack([_shuffle_within(label, label % p, rng) for _ in range(N_PERMUTATIONS // 4)])
        if bootstrap_p(_spread(accuracy, shuffled % longest), observed) >= NAMING_ALPHA:
            return p
    return longest


def _shuffle_within(label: np.ndarray, strata: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    out = label.copy()
    for s in np.unique(strata):
        where = np.flatnonzero(strata == s)
        out[where] = label[rng.permutation(where)]
    return out


def _spread(accuracy: np.ndarray, label: np.ndarray) -> np.ndarray:
    """Between-class sum of squares for each row of ``label`` [P,C] (or one [C])."""
    label = np.atleast_2d(label)
    mean = accuracy.mean()
    total = np.zeros(len(label))
    for p in np.unique(label):
        mask = label == p
        count = mask.sum(axis=1)
        sums = (mask * accuracy).sum(axis=1)
        total += np.where(count > 0, (sums / np.maximum(count, 1) - mean) ** 2 * count, 0.0)
    return total


def _permutation_p(accuracy: np.ndarray, label: np.ndarray, periods: list[int], rng: np.random.Generator) -> float:
    """The largest spread per degree of freedom over ``periods`` against the same statistic with
    the contents' labels shuffled."""

    def statistic(labels: np.ndarray) -> np.ndarray:
        return np.max([_spread(accuracy, labels % p) / max(len(np.unique(label % p)) - 1, 1) for p in periods], axis=0)

    shuffled = np.stack([rng.permutation(label) for _ in range(N_PERMUTATIONS)])
    return bootstrap_p(statistic(shuffled), float(statistic(label)[0]))


# -- words ------------------------------------------------------------------------------------


def describe_phase(factor: str, phase: int, step: int, align: int, period: int | None = None) -> str:
    """'prompt length ≡ 3 mod 4' for the end; 'needle phase 3'; 'distance ≡ 1 mod 4'; at another
    period than the step, 'prompt length ≡ 5 mod 8' (``phases.Factor.describe``)."""
    return TABLE[factor].describe(phase, period or step, step, align)


def others_words(t: dict, step: int) -> str:
    """'the other phases' at the step, 'the other residues mod 8' at another period."""
    period = t.get("period") or step
    return "the other phases" if period == step else f"the other residues mod {period}"


def worst_drop(t: dict) -> float:
    """The worst phase's effect against the mean of the other phases, in pp (effects are deviations
    from the mean over phases, so this is the worst's times L / (L - 1))."""
    effects = {row["phase"]: row["effect_pp"] for row in t["phases"]}
    worst = effects[t["worst_phase"]]
    others = [v for p, v in effects.items() if p != t["worst_phase"]]
    return worst - sum(others) / len(others) if others else 0.0


def reading(factors: dict, adjusted: dict[str, float], step: int, alpha: float) -> str | None:
    """One sentence: which factor the effect follows, what the design held and what it tied."""
    if not factors or not factors["tests"] and not factors["groups"]:
        return None
    align = factors.get("align", 0)
    claimed = [t for t in factors["tests"] if adjusted.get(f"factor:{t['name']}", 1.0) < alpha]
    parts = []
    for t in claimed:
        f = t["members"][0]
        where = "between contents, " if t["kind"] == "between" else ""
        parts.append(
            f"{group_words(t['members'])} ({describe_phase(f, t['worst_phase'], step, align, t.get('period'))}: "
            f"{worst_drop(t):+.1f} pp vs {others_words(t, step)}; {where}{p_text(t['p_value'])})"
        )
    others = [t for t in factors["tests"] if t not in claimed and t["p_value"] is not None]  # tested, not claimed
    if parts:
        text = "the effect follows " + " and ".join(parts)
        if others:
            text += ", not " + " or ".join(f"{group_words(t['members'])} ({p_text(t['p_value'])})" for t in others)
    elif others:
        which = "no tested factor's phase" if len(others) < len(factors["tests"]) else "no factor's phase"
        text = f"{which} shows an effect: " + ", ".join(
            f"{group_words(t['members'])} {p_text(t['p_value'])}" for t in others
        )
    else:
        text = "the factors were not tested"
    untested = [t for t in factors["tests"] if t not in claimed and t["p_value"] is None]
    if untested and (parts or others):  # never "no factor shows an effect" over one that was not tested
        text += "; not tested: " + ", ".join(group_words(t["members"]) for t in untested)
    return text + design_words(factors, claimed)


def design_words(factors: dict, claimed: list[dict]) -> str:
    """What the design tied (among the claimed groups) and what it held, as '; ...' clauses."""
    if factors["held"].get("distance") == 0 and factors["groups"] == [["needle", "end"]]:
        return "; the anchor is the answer's first token, so its phase is the prompt end's (the distance is held at 0)"
    words = []
    for group in factors["groups"]:
        if len(group) > 1 and any(t["members"] == group for t in claimed):
            words.append(
                f"this design moves {' and '.join(TABLE[f].words for f in group)} together, so the effect could follow "
                "either (--design crossed separates them)"
            )
    held = [f for f, v in factors["held"].items() if v is not None]
    if held:
        words.append("it holds " + " and ".join(TABLE[f].words for f in held) + " fixed")
    return ("; " + "; ".join(words)) if words else ""
