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

from phasescope.analysis.cluster_ols import bootstrap_p, critical_value, fit, full_rank, studentized, within
from phasescope.analysis.intervals import t_quantile
from phasescope.analysis.offset_effects import MIN_CONTENTS
from phasescope.analysis.phase_effects import WALD_TOL, _wald, pairwise, range_bounds
from phasescope.analysis.pvalue import p_text
from phasescope.analysis.records import RecordArrays
from phasescope.analysis.trend import legendre

FACTORS = ("needle", "end", "distance")
NAMES = {"needle": "the needle's phase", "end": "the prompt end's phase", "distance": "the distance's phase"}
N_PERMUTATIONS = 2000


def factor_phases(r: RecordArrays) -> dict[str, np.ndarray] | None:
    """[N] each record's phase of each factor (None: the records lack answer_pos or align)."""
    if r.end_phase is None:
        return None
    return {"needle": r.phase, "end": r.end_phase, "distance": (r.end_phase - r.phase) % r.step}


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
    ``shape``: their ``layout`` when the caller has it already."""
    phases = factor_phases(r)
    if phases is None:
        return None
    shape = shape or layout(r, phases)
    informative = _informative(r)
    tests = []
    if shape["groups"]:
        tests += _within(r, phases, shape["groups"], trend_degree, rng, n_boot, informative, trend_note)
    for f, value in shape["held"].items():
        if value is None:
            tests.append(_between(r, phases[f], f, rng))
    return {
        "groups": shape["groups"],
        "held": {f: v for f, v in shape["held"].items()},
        "align": r.align,
        "n_informative_contents": informative,
        "tests": tests,
        "model": "linear probability model with content fixed effects, the phase statistics' trend over offsets "
        "and answer_pos; each factor's phases tested by a cluster-robust Wald statistic (wild cluster bootstrap); "
        "factors held within contents compared between contents by a permutation test",
    }


def _informative(r: RecordArrays) -> int:
    """Contents whose outcome is not the same at every record (any outcome: 0/1, or a difference)."""
    low = np.full(r.n_contents, np.inf)
    high = np.full(r.n_contents, -np.inf)
    np.minimum.at(low, r.content, r.correct)
    np.maximum.at(high, r.content, r.correct)
    return int((high > low).sum())


def _phase_rows(r: RecordArrays, labels: np.ndarray, levels: np.ndarray) -> list[dict]:
    rows = []
    for p in levels:
        mask = labels == p
        rows.append({"phase": int(p), "n": int(mask.sum()), "accuracy": float(r.correct[mask].mean())})
    return rows


def _within(r, phases, groups, degree, rng, n_boot, informative, trend_note) -> list[dict]:
    """One model for every group of tied factors; a test per group."""
    name = lambda group: "+".join(group)  # noqa: E731
    empty = [_test(name(g), g, "within", _phase_rows(r, phases[g[0]], np.unique(phases[g[0]]))) for g in groups]
    if degree is None:
        for t in empty:
            t["note"] = "not tested: " + (trend_note or "the drift over offsets could not be separated from the phases")
        return empty
    blocks, slices, levels_of = [legendre(r.offset.astype(float), max(degree, 1))], [], []
    for g in groups:
        labels = phases[g[0]]
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
        for t in empty:
            t["note"] = "not tested: the factors' phases are not all seen apart from the drift within contents"
        return empty
    y = within(r.correct, r.content, weight, r.n_contents)
    model = fit(x, y, weight, r.content, r.n_contents)
    cov = model.covariance
    draws = list(model.draws(rng, n_boot)) if informative >= MIN_CONTENTS and n_boot > 0 else []
    out = []
    for t, sl, levels in zip(empty, slices, levels_of, strict=True):
        _effects(t, model.beta[sl], cov[sl, sl], len(levels), r.n_contents)
        if draws:
            t["p_value"] = _wald_p(model.beta[sl], cov[sl, sl], draws, sl)
            t["range_ci_pp"] = _range_interval(model.beta[sl], cov[sl, sl], draws, sl, len(levels))
        else:
            t["note"] = f"no p-value under {MIN_CONTENTS} contents whose answers vary ({informative})"
        out.append(t)
    return out


def _test(name: str, members: list[str], kind: str, rows: list[dict]) -> dict:
    return {"name": name, "members": members, "kind": kind, "phases": rows, "range_pp": None, "range_ci_pp": None,
            "p_value": None, "worst_phase": None, "best_phase": None, "note": None}  # fmt: skip


def _effects(t: dict, beta: np.ndarray, cov: np.ndarray, n_levels: int, n_contents: int) -> None:
    """Each phase's effect as a deviation from the mean over phases, with a t interval over contents."""
    rows = _level_rows(n_levels)
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


def _range_interval(beta: np.ndarray, cov: np.ndarray, draws: list, sl: slice, n_levels: int) -> list[float]:
    """95% interval of the factor's max - min phase effect, pp, as the gap's (``range_bounds``
    at the bootstrap's max-|t| over every pairwise phase contrast)."""
    pairs = pairwise(_level_rows(n_levels))  # [Q,L-1]
    max_t = np.concatenate([np.abs(studentized(pairs, d[:, sl], c[:, sl, sl])).max(axis=1) for d, c in draws])
    return [100 * v for v in range_bounds(pairs, beta, cov, float(critical_value(max_t)))]


def _wald_p(beta: np.ndarray, cov: np.ndarray, draws: list, sl: slice) -> float:
    """Bootstrap p of the group's Wald statistic (``phase_effects._wald``: a direction with no spread
    and no effect -- a deterministic server's untouched factor -- adds nothing)."""
    null = np.concatenate([_wald(delta[:, sl], covs[:, sl, sl]) for delta, covs in draws])
    return bootstrap_p(null, float(_wald(beta, cov)), tol=WALD_TOL)


def _between(r: RecordArrays, labels: np.ndarray, factor: str, rng: np.random.Generator) -> dict:
    """A factor held within contents, different between them: contents' accuracies by its phase."""
    total = np.bincount(r.content, minlength=r.n_contents)
    seen = total > 0
    accuracy = np.bincount(r.content, weights=r.correct, minlength=r.n_contents)[seen] / total[seen]
    label = np.zeros(r.n_contents, dtype=np.int64)
    label[r.content] = labels
    label = label[seen]
    levels = np.unique(label)
    rows = [
        {"phase": int(p), "n_contents": int((label == p).sum()), "accuracy": float(accuracy[label == p].mean())}
        for p in levels
    ]
    t = _test(factor, [factor], "between", rows)
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
    t["p_value"] = _permutation_p(accuracy, label, levels, rng)
    return t


def _spread(accuracy: np.ndarray, label: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """Between-phase sum of squares for each row of ``label`` [P,C] (or one [C])."""
    label = np.atleast_2d(label)
    mean = accuracy.mean()
    total = np.zeros(len(label))
    for p in levels:
        mask = label == p
        count = mask.sum(axis=1)
        sums = (mask * accuracy).sum(axis=1)
        total += np.where(count > 0, (sums / np.maximum(count, 1) - mean) ** 2 * count, 0.0)
    return total


def _permutation_p(accuracy: np.ndarray, label: np.ndarray, levels: np.ndarray, rng: np.random.Generator) -> float:
    observed = float(_spread(accuracy, label, levels)[0])
    shuffled = np.stack([rng.permutation(label) for _ in range(N_PERMUTATIONS)])
    return bootstrap_p(_spread(accuracy, shuffled, levels), observed)


# -- words ------------------------------------------------------------------------------------


def describe_phase(factor: str, phase: int, step: int, align: int) -> str:
    """'prompt length ≡ 3 mod 4' for the end; 'needle phase 3'; 'distance ≡ 1 mod 4'."""
    if factor == "end":
        return f"prompt length ≡ {(phase + align) % step} mod {step}"
    if factor == "distance":
        return f"needle-to-end distance ≡ {phase} mod {step}"
    return f"needle phase {phase}"


def worst_drop(t: dict) -> float:
    """The worst phase's effect against the mean of the other phases, in pp (effects are deviations
    from the mean over phases, so this is the worst's times L / (L - 1))."""
    effects = {row["phase"]: row["effect_pp"] for row in t["phases"]}
    worst = effects[t["worst_phase"]]
    others = [v for p, v in effects.items() if p != t["worst_phase"]]
    return worst - sum(others) / len(others) if others else 0.0


def group_words(members: list[str]) -> str:
    return " or ".join(NAMES[f] for f in members)


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
            f"{group_words(t['members'])} ({describe_phase(f, t['worst_phase'], step, align)}: "
            f"{worst_drop(t):+.1f} pp vs the other phases; {where}{p_text(t['p_value'])})"
        )
    others = [t for t in factors["tests"] if t not in claimed and t["p_value"] is not None]  # tested, not claimed
    if parts:
        text = "the effect follows " + " and ".join(parts)
        if others:
            text += ", not " + " or ".join(f"{group_words(t['members'])} ({p_text(t['p_value'])})" for t in others)
    elif others:
        text = "no factor's phase shows an effect: " + ", ".join(
            f"{group_words(t['members'])} {p_text(t['p_value'])}" for t in others
        )
    else:
        text = "the factors were not tested"
    return text + design_words(factors, claimed)


def design_words(factors: dict, claimed: list[dict]) -> str:
    """What the design tied (among the claimed groups) and what it held, as '; ...' clauses."""
    if factors["held"].get("distance") == 0 and factors["groups"] == [["needle", "end"]]:
        return "; the anchor is the answer's first token, so its phase is the prompt end's (the distance is held at 0)"
    words = []
    for group in factors["groups"]:
        if len(group) > 1 and any(t["members"] == group for t in claimed):
            words.append(
                f"this design moves {' and '.join(NAMES[f] for f in group)} together, so the effect could follow "
                "either (--design crossed separates them)"
            )
    held = [f for f, v in factors["held"].items() if v is not None]
    if held:
        words.append("it holds " + " and ".join(NAMES[f] for f in held) + " fixed")
    return ("; " + "; ".join(words)) if words else ""
