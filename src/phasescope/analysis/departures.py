"""Does a stack depart from a reference on identical items, and what does the departure follow?
The paired test behind ``compare --paired`` and ``phasescope check`` (docs/sweeps.md, 'Paired
comparison'; docs/serving.md, 'Catch serving regressions in CI').

Three kinds of departure, each read on the records it could happen on, so that B - A never
inherits A's own phase pattern (a model that is worse at one needle phase has fewer records there
that B could break):

    kind      a record departs when                              read on the records where
    wrong     B is wrong                                         A is right
    right     B is right                                         A is wrong
    logprob   |log p_B(target) - log p_A(target)| > tolerance    both scored the target

Tests, each with its null imposed exactly by a permutation the null leaves the data's distribution
unchanged under:

* **asymmetry** -- is B worse (or better) than A at all, wherever it is: each content's
  ``wrong - right`` count with its sign flipped at random (A and B exchangeable under the null).
* **structure** -- for each kind, the departures per residue of each factor
  (``phases.FACTORS``) modulo each candidate period (``phases.candidate_periods``), and per length
  band when the run spans several, against a shuffle of the departures among the records of the
  same content and band (a stratified permutation, as Mantel-Haenszel's). The statistic of each
  (factor, period) is ``sum (observed - expected)^2 / expected`` over its classes; the smallest
  permutation p over them is referred to its own permutation distribution (Westfall-Young min-P),
  so trying three factors at three periods costs no false claims. A content with no departure, or
  only departures, is the same under every shuffle and adds nothing, so no minimum number of
  contents is needed; the p-value counts the contents that carry departures. The period named is
  the longest tried, reduced to the shortest divisor it does not beat (the departures shuffled
  within that divisor's classes); a factor held within every content is compared between
  contents (contents' labels shuffled).

The family (asymmetry, and the structure of each kind with departures) is Holm-adjusted; a factor
is named only when its kind's structure test survives, otherwise the departures "follow no factor
tested", with their counts.

Shape legend: N paired records, M records of the informative strata, B permutations, R classes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from phasescope.analysis.pvalue import p_text
from phasescope.analysis.verdict import holm
from phasescope.phases import FACTORS, candidate_periods, lengths_words

ALPHA = 0.05
N_PERMUTATIONS = 2000
KINDS = ("wrong", "right", "logprob")
DEFAULT_TOLERANCE = 1.0  # nats: |Δ log p(target)| above it is a departure in log-prob


@dataclass
class Pairs:
    """Paired records as arrays (one row per record both runs scored on identical items)."""

    step: int
    align: int
    content: np.ndarray  # [N] content index
    band: np.ndarray  # [N] index into ``bands``
    bands: list  # the prompt lengths asked for (--context-tokens), [None] when one default length
    positions: dict[str, np.ndarray]  # factor -> [N] position (phases.Factor.position)
    periods: list[int]  # the periods the positions can be read at
    a_correct: np.ndarray  # [N] bool
    b_correct: np.ndarray  # [N] bool
    a_logprob: np.ndarray  # [N] log p(target) in A (nan: not scored)
    b_logprob: np.ndarray  # [N]
    answer_pos: np.ndarray  # [N] the prompt's length
    offset: np.ndarray | None = None  # [N] the sweep's offset (None: one block)
    keys: list = field(default_factory=list)  # [N] record keys (content, offset, variant)
    # each kind's units when they are requests, not records: a multi-token answer teacher-forced is one
    # request per token (length answer_pos + j), and a serving fault keyed on the request's length departs
    # at the request that carries it (``Pairs`` of the requests; None: the records are the units)
    requests: dict[str, Pairs] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.content)

    def departed(self, kind: str, tolerance: float) -> tuple[np.ndarray, np.ndarray]:
        """([N] departed, [N] could have departed) for one kind."""
        if kind == "wrong":
            return self.a_correct & ~self.b_correct, self.a_correct.copy()
        if kind == "right":
            return ~self.a_correct & self.b_correct, ~self.a_correct
        scored = np.isfinite(self.a_logprob) & np.isfinite(self.b_logprob)
        delta = np.where(scored, self.b_logprob - self.a_logprob, 0.0)
        return scored & (np.abs(delta) > tolerance), scored


def departure_statistics(
    p: Pairs,
    names: tuple[str, str] = ("A", "B"),
    tolerance: float = DEFAULT_TOLERANCE,
    seed: int = 0,
    n_permutations: int = N_PERMUTATIONS,
    reference_free: bool = False,
) -> dict:
    """The paired comparison: counts, the log-prob difference, the tests and the sentence.
    ``reference_free``: A is the known right answer (every record right, log-prob not compared)."""
    rng = np.random.default_rng(seed)
    kinds = ("wrong",) if reference_free else KINDS
    out: dict = {"names": list(names), "n_pairs": p.n, "n_contents": int(len(np.unique(p.content))), "kinds": {}}
    for kind in kinds:
        departed, base = p.departed(kind, tolerance)
        entry = {"departures": int(departed.sum()), "base": int(base.sum()), "test": None}
        entry["by_band"] = _by_band(p, departed, base)
        units = p.requests.get(kind, p)  # the test reads each request where the records are several requests
        u_departed, u_base = units.departed(kind, tolerance)
        if u_departed.any() and (u_base & ~u_departed).any():
            entry["test"] = _structure(units, u_departed, u_base, _strata(units), rng, n_permutations)
            entry["test"]["units"] = "records" if units is p else "requests"
        out["kinds"][kind] = entry
    out["asymmetry"] = None if reference_free else _asymmetry(p, rng, n_permutations)
    out["logprob"] = None if reference_free else _logprob_summary(p, tolerance)
    tests = {k: (v["test"] or {}).get("p_value") for k, v in out["kinds"].items()}
    if out["asymmetry"] is not None:
        tests["asymmetry"] = out["asymmetry"]["p_value"]
    out["adjusted_p"] = holm(tests)
    out["p_value"] = min(out["adjusted_p"].values(), default=1.0)  # B departs at all: the family's smallest
    out["tolerance"] = tolerance
    out["lengths"] = [int(p.answer_pos.min()), int(p.answer_pos.max())] if p.n else None
    out["bands"] = p.bands
    out["sentence"] = _sentence(p, out, names, reference_free)
    return out


# -- the permutation tests ----------------------------------------------------------------------


def _blocks(p: Pairs) -> np.ndarray:
    """[N] each record's block of offsets, as long as the longest period (0 without offsets)."""
    return np.zeros(p.n, dtype=np.int64) if p.offset is None else p.offset // p.periods[-1]


def _strata(p: Pairs, with_band: bool = True) -> np.ndarray:
    """[N] one stratum per (content, band, block of offsets as long as the longest period): the
    departures are shuffled within each. A nondeterministic B departs more where A's answers are
    less sure, which drifts over the offsets like accuracy does; within a block of offsets the drift
    is small, so it cannot pass for a factor (the needle's phase follows the offset). Without the
    band (``with_band`` False): the strata the length band itself is tested in."""
    block = _blocks(p)
    unit = p.content.astype(np.int64) * (len(p.bands) + 1) + (p.band if with_band else 0)
    return unit * (int(block.max(initial=0)) + 1) + block


def _units(p: Pairs) -> np.ndarray:
    """[N] (content, band): the units a factor held within contents is compared between."""
    return p.content.astype(np.int64) * (len(p.bands) + 1) + p.band


def label_sets(p: Pairs, strata: np.ndarray, mask: np.ndarray) -> list[dict]:
    """The labellings the within-strata test tries: each factor (tied factors as one group) at each
    period it moves at within strata; each a dict with ``members``, ``period`` and ``labels`` [N]."""
    sets = []
    for members in _groups(p, strata, mask):
        for period in p.periods:
            labels = p.positions[members[0]] % period
            if _moves(strata[mask], labels[mask]):
                sets.append({"members": members, "period": period, "labels": labels})
    return sets


def _groups(p: Pairs, strata: np.ndarray, mask: np.ndarray) -> list[list[str]]:
    """Factors that determine each other within every stratum (at the longest period) are one group."""
    longest = p.periods[-1]
    groups: list[list[str]] = []
    for name in FACTORS:
        labels = p.positions[name][mask] % longest
        for group in groups:
            other = p.positions[group[0]][mask] % longest
            if (
                _distinct(strata[mask], labels, other)
                == _distinct(strata[mask], labels)
                == _distinct(strata[mask], other)
            ):
                group.append(name)
                break
        else:
            groups.append([name])
    return groups


def _distinct(*columns: np.ndarray) -> int:
    return len(np.unique(np.stack(columns, axis=1), axis=0)) if len(columns[0]) else 0


def _moves(strata: np.ndarray, labels: np.ndarray) -> bool:
    return _distinct(strata, labels) > _distinct(strata)


def _structure(p: Pairs, departed, base, strata, rng, n_permutations: int) -> dict:
    """The departures against every factor within strata (min-P over the label sets), the length
    band within contents, and a factor held within every content between contents; the tests made
    Bonferroni-combined."""
    informative = _informative(departed, base, strata)
    sets = label_sets(p, strata, informative)
    result = {"contents_with_departures": int(len(np.unique(p.content[departed]))), "p_value": None}
    made = []
    if sets:
        made.append(_min_p(departed, informative, strata, sets, rng, n_permutations) | {"kind": "within"})
    if len(p.bands) > 1:
        by_content = _strata(p, with_band=False)
        inner = _informative(departed, base, by_content)
        band = {"members": ["length"], "period": None, "labels": p.band.copy()}
        if _moves(by_content[inner], p.band[inner]):
            made.append(_min_p(departed, inner, by_content, [band], rng, n_permutations) | {"kind": "within"})
    between = _between(p, departed, base, _units(p), rng, n_permutations)
    if between is not None:
        made.append(between | {"kind": "between"})
    if not made:
        result["note"] = "no factor moves among the records that carry departures"
        return result
    best = min(made, key=lambda t: t["p_value"])
    result["p_value"] = min(1.0, best["p_value"] * len(made))
    result["tests"] = [t["per_set"] for t in made]
    chosen = best["set"]
    if chosen["period"] is not None and best["kind"] == "within":
        chosen = _shortest_period(p, departed, base, strata, chosen, rng, n_permutations)
    result["factor"] = chosen["members"]
    result["period"] = chosen["period"]
    result["kind"] = best["kind"]
    result["classes"] = _classes(departed, base, chosen["labels"])
    result["most"] = [c["value"] for c in most_departing(result["classes"])]
    if result["p_value"] < ALPHA and best["kind"] == "within":
        result["also"] = _also(p, departed, base, chosen, rng, n_permutations)
    return result


def _also(p: Pairs, departed, base, chosen: dict, rng, n_permutations: int) -> dict | None:
    """A second factor the departures follow within the first's classes (a fault at prompt length ≡ 3
    mod 4 only in the band past a threshold): every other labelling tested with the departures
    shuffled within the strata and the first factor's classes; named when p < alpha (Bonferroni
    over the factors and the band)."""
    labels = chosen["labels"]
    classes = int(labels.max()) + 1
    made = []
    strata = _strata(p) * classes + labels
    inner = _informative(departed, base, strata)
    sets = [s for s in label_sets(p, strata, inner) if not set(s["members"]) & set(chosen["members"])]
    if sets:
        made.append((_min_p(departed, inner, strata, sets, rng, n_permutations), strata))
    if len(p.bands) > 1 and chosen["members"] != ["length"]:
        by_content = _strata(p, with_band=False) * classes + labels
        inner = _informative(departed, base, by_content)
        if _moves(by_content[inner], p.band[inner]):
            band = {"members": ["length"], "period": None, "labels": p.band.copy()}
            made.append((_min_p(departed, inner, by_content, [band], rng, n_permutations), by_content))
    if not made:
        return None
    test, strata = min(made, key=lambda pair: pair[0]["p_value"])
    p_value = min(1.0, test["p_value"] * len(made))
    if p_value >= ALPHA:
        return None
    second = test["set"]
    if second["period"] is not None:
        second = _shortest_period(p, departed, base, strata, second, rng, n_permutations)
    return {"factor": second["members"], "period": second["period"], "p_value": p_value,
            "classes": _classes(departed, base, second["labels"])}  # fmt: skip


def _informative(departed: np.ndarray, base: np.ndarray, strata: np.ndarray) -> np.ndarray:
    """[N] base records of strata holding both a departure and a record that did not depart."""
    codes, inverse = np.unique(strata, return_inverse=True)
    hits = np.bincount(inverse, weights=(departed & base).astype(float), minlength=len(codes))
    total = np.bincount(inverse, weights=base.astype(float), minlength=len(codes))
    keep = (hits > 0) & (hits < total)
    return base & keep[inverse]


def _shuffled(departed: np.ndarray, strata: np.ndarray, rng, n: int) -> np.ndarray:
    """[B, M] the departures shuffled within strata (``departed`` and ``strata`` are [M])."""
    order = np.argsort(strata, kind="stable")
    ranked = strata[order].astype(float)
    keys = ranked[None, :] + rng.random((n, len(order)))  # each stratum's block stays in place
    permuted = order[np.argsort(keys, axis=1)]
    out = np.empty((n, len(order)), dtype=np.float32)
    out[:, order] = departed[permuted]
    return out


def _chi(counts: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """sum over classes (O - E)^2 / E for counts [..., R]."""
    keep = expected > 0
    return (((counts[..., keep] - expected[keep]) ** 2) / expected[keep]).sum(axis=-1)


def _expected(departed: np.ndarray, strata: np.ndarray, codes: np.ndarray, n_classes: int) -> np.ndarray:
    """[R] departures per class expected under shuffles within strata."""
    s_codes, s_index = np.unique(strata, return_inverse=True)
    rate = np.bincount(s_index, weights=departed.astype(float)) / np.bincount(s_index)
    return np.bincount(codes, weights=rate[s_index], minlength=n_classes)


def _min_p(departed, mask, strata, sets, rng, n_permutations: int) -> dict:
    d, s = departed[mask], strata[mask]
    shuffled = _shuffled(d, s, rng, n_permutations)  # [B, M]
    observed, null = [], []
    for one in sets:
        codes = np.unique(one["labels"][mask], return_inverse=True)[1]
        n_classes = int(codes.max()) + 1
        onehot = np.zeros((len(codes), n_classes), dtype=np.float32)
        onehot[np.arange(len(codes)), codes] = 1.0
        expected = _expected(d, s, codes, n_classes)
        observed.append(float(_chi(d.astype(float) @ onehot, expected)))
        null.append(_chi(shuffled @ onehot, expected))
    raw, family = _min_p_family(np.array(observed), np.stack(null, axis=1))
    spread = [observed[i] / max(len(np.unique(one["labels"][mask])) - 1, 1) for i, one in enumerate(sets)]
    best = min(range(len(sets)), key=lambda i: (raw[i], -spread[i]))  # ties (a floor p): the larger per class
    per_set = [
        {"members": one["members"], "period": one["period"], "p_value": float(raw[i])} for i, one in enumerate(sets)
    ]
    return {"p_value": family, "set": sets[best], "per_set": {"within": per_set}}


def _min_p_family(observed: np.ndarray, null: np.ndarray) -> tuple[np.ndarray, float]:
    """Each set's permutation p [S] (observed [S] against null [B, S]) and the family's: the smallest
    p referred to the smallest p of every draw, each draw's p per set its rank among all B + 1 draws
    (the observed one included): Westfall-Young min-P, exact for exchangeable draws."""
    draws = np.vstack([observed[None, :], null])  # [B+1, S]
    n = len(draws)
    ordered = np.sort(draws, axis=0)
    at_least = np.stack([n - np.searchsorted(ordered[:, i], draws[:, i] - 1e-9) for i in range(draws.shape[1])], 1)
    p = at_least / n  # [B+1, S]: each draw's share of draws at or above it
    smallest = p.min(axis=1)
    return p[0], float(np.mean(smallest <= smallest[0] + 1e-12))


def _shortest_period(p: Pairs, departed, mask, strata, chosen: dict, rng, n_permutations: int) -> dict:
    """``chosen``'s factor at the shortest tried divisor of its longest period that the longest
    does not beat (departures shuffled within each content and the divisor's classes); ``mask``:
    the records that could depart."""
    members = chosen["members"]
    units = _units(p)  # naming needs no drift blocks: the contents' own records tell the periods apart
    longest = max(q for q in p.periods if _moves(units[mask], p.positions[members[0]][mask] % q))
    position = p.positions[members[0]]
    top = {"members": members, "period": longest, "labels": position % longest}
    for q in sorted(q for q in p.periods if q < longest and longest % q == 0):
        refined = units * longest + position % q
        inner = _informative(departed, mask, refined)
        if not inner.any():
            return {"members": members, "period": q, "labels": position % q}
        test = _min_p(departed, inner, refined, [top], rng, max(200, n_permutations // 4))
        if test["p_value"] >= ALPHA:
            return {"members": members, "period": q, "labels": position % q}
    return top


def _between(p: Pairs, departed, base, units, rng, n_permutations: int) -> dict | None:
    """A factor held within every content (at the step) but different between contents: the
    contents' departures by its residue, contents' labels shuffled within length bands."""
    content_of = np.unique(units, return_inverse=True)[1]
    n_units = int(content_of.max()) + 1 if len(content_of) else 0
    hits = np.bincount(content_of, weights=(departed & base).astype(float), minlength=n_units)
    total = np.bincount(content_of, weights=base.astype(float), minlength=n_units)
    seen = total > 0
    if seen.sum() < 2 or hits.sum() == 0:
        return None
    first = np.zeros(n_units, dtype=np.int64)
    first[content_of[::-1]] = np.arange(len(content_of))[::-1]
    band = p.band[first][seen]
    sets = []
    for name in FACTORS:
        pos = p.positions[name]
        if _moves(units, pos % p.step):
            continue  # moves within contents: the stratified test reads it
        for period in p.periods:
            labels = (pos % period)[first][seen]
            if len(np.unique(labels)) > 1:
                sets.append({"members": [name], "period": period, "labels": labels})
    if not sets:
        return None
    h, t = hits[seen], total[seen]
    observed, null = [], []
    for one in sets:
        labels = one["labels"]
        rate = h.sum() / t.sum()
        expected = np.bincount(labels, weights=t * rate)
        observed.append(float(_chi(np.bincount(labels, weights=h, minlength=len(expected)), expected)))
        perms = np.stack([_permute_within(labels, band, rng) for _ in range(n_permutations)])
        counts = np.stack([np.bincount(row, weights=h, minlength=len(expected)) for row in perms])
        null.append(_chi(counts, expected))
    raw, family = _min_p_family(np.array(observed), np.stack(null, axis=1))
    best = int(np.argmin(raw))
    chosen = dict(sets[best])
    chosen["labels"] = (p.positions[chosen["members"][0]] % chosen["period"]).astype(np.int64)
    per_set = [{"members": s["members"], "period": s["period"], "p_value": float(raw[i])} for i, s in enumerate(sets)]
    return {"p_value": family, "set": chosen, "per_set": {"between": per_set}}


def _permute_within(labels: np.ndarray, strata: np.ndarray, rng) -> np.ndarray:
    out = labels.copy()
    for s in np.unique(strata):
        where = np.flatnonzero(strata == s)
        out[where] = labels[rng.permutation(where)]
    return out


def most_departing(classes: list[dict]) -> list[dict]:
    """The classes at the largest departure rate, in value order: ties are named as ties (the
    sentence, paired.json's ``most`` and the gate all read this one rule)."""
    rate = {c["value"]: c["departures"] / max(c["n"], 1) for c in classes}
    top = max(rate.values(), default=0.0)
    return sorted((c for c in classes if np.isclose(rate[c["value"]], top)), key=lambda c: c["value"])


def _classes(departed: np.ndarray, base: np.ndarray, labels: np.ndarray) -> list[dict]:
    """Per class of the named labelling: records that could depart, and departures."""
    rows = []
    for value in np.unique(labels[base]):
        here = base & (labels == value)
        rows.append({"value": int(value), "n": int(here.sum()), "departures": int((departed & here).sum())})
    return rows


def _asymmetry(p: Pairs, rng, n_permutations: int) -> dict:
    """B worse (or better) than A at all: per content, wrong - right, signs flipped at random."""
    wrong = (p.a_correct & ~p.b_correct).astype(float)
    right = (~p.a_correct & p.b_correct).astype(float)
    n_contents = int(p.content.max()) + 1 if p.n else 0
    d = np.bincount(p.content, weights=wrong - right, minlength=n_contents)
    d = d[d != 0]
    observed = float(abs(d.sum()))
    if len(d) == 0:
        return {"difference": 0, "contents": 0, "p_value": 1.0}
    signs = rng.choice([-1.0, 1.0], size=(n_permutations, len(d)))
    null = np.abs(signs @ d)
    p_value = float((1 + np.sum(null >= observed - 1e-9)) / (1 + n_permutations))
    return {"difference": int(wrong.sum() - right.sum()), "contents": int(len(d)), "p_value": p_value}


def _logprob_summary(p: Pairs, tolerance: float) -> dict | None:
    """The target's log-prob in B minus in A: the largest |difference| and where, its mean, and
    per length band."""
    scored = np.isfinite(p.a_logprob) & np.isfinite(p.b_logprob)
    if not scored.any():
        return None
    delta = np.where(scored, p.b_logprob - p.a_logprob, 0.0)
    worst = int(np.argmax(np.abs(delta)))
    summary = {
        "largest_abs": float(abs(delta[worst])),
        "largest_at": list(p.keys[worst]) if p.keys else None,
        "mean_abs": float(np.abs(delta[scored]).mean()),
        "mean": float(delta[scored].mean()),
        "beyond_tolerance": int((scored & (np.abs(delta) > tolerance)).sum()),
        "scored": int(scored.sum()),
        "tolerance": tolerance,
    }
    if len(p.bands) > 1:
        summary["by_band"] = [
            {"band": band, "largest_abs": float(np.abs(delta[scored & (p.band == i)]).max(initial=0.0))}
            for i, band in enumerate(p.bands)
        ]
    return summary


def _by_band(p: Pairs, departed, base) -> list[dict] | None:
    if len(p.bands) <= 1:
        return None
    return [
        {"band": band, "n": int((base & (p.band == i)).sum()), "departures": int((departed & (p.band == i)).sum())}
        for i, band in enumerate(p.bands)
    ]


# -- words ------------------------------------------------------------------------------------


def describe_class(p: Pairs, members: list[str], period: int | None, value: int) -> str:
    """'prompt length ≡ 5 mod 8', 'needle phase 3', 'length band is 4,096 tokens' (each reads after
    'records whose')."""
    if members == ["length"]:
        return f"length band is {_tokens(p.bands[value])}"
    return FACTORS[members[0]].describe(value, period, p.step, p.align)


def _tokens(band) -> str:
    return "the default length" if band is None else f"{band:,} tokens"


def lengths_text(p: Pairs) -> str:
    """The lengths tested (``phases.lengths_words``)."""
    bands = [b for b in p.bands if b is not None]
    return lengths_words(int(p.answer_pos.min()), int(p.answer_pos.max()), bands)


WHAT = {
    "wrong": "{b} is wrong where {a} is right",
    "right": "{b} is right where {a} is wrong",
    "logprob": "{b}'s log-prob of the right answer differs from {a}'s by more than {tol:g} nats",
}


def _sentence(p: Pairs, out: dict, names: tuple[str, str], reference_free: bool) -> str:
    a, b = names
    kinds = out["kinds"]
    if reference_free:
        a = "the known answer"
    lengths = lengths_text(p)
    if not any(k["departures"] for k in kinds.values()):
        text = f"{b} agrees with {a} on every one of {p.n:,} records ({lengths})"
        if out.get("logprob"):
            text += f"; largest |Δ log-prob| {out['logprob']['largest_abs']:.2g} nats"
        return text
    parts = [_kind_words(p, kind, entry, a, b, out) for kind, entry in kinds.items() if entry["departures"]]
    text = "; ".join(parts) + f" ({lengths})"
    asym = out.get("asymmetry")
    if asym and asym["contents"] and out["adjusted_p"].get("asymmetry", 1.0) < ALPHA:
        worse = "worse" if asym["difference"] > 0 else "better"
        text += f"; {b} is {worse} than {a} overall ({p_text(out['adjusted_p']['asymmetry'])}, sign-flip over contents)"
    if out.get("logprob"):
        text += f"; largest |Δ log-prob| {out['logprob']['largest_abs']:.2g} nats"
    return text


def _kind_words(p: Pairs, kind: str, entry: dict, a: str, b: str, out: dict) -> str:
    what = WHAT[kind].format(a=a, b=b, tol=out["tolerance"])
    k, n = entry["departures"], entry["base"]
    test = entry["test"] or {}
    adjusted = out["adjusted_p"].get(kind)
    if test.get("p_value") is not None and adjusted is not None and adjusted < ALPHA:
        classes, tops = test["classes"], most_departing(test["classes"])
        top = tops[0]
        rest_k = sum(c["departures"] for c in classes) - sum(c["departures"] for c in tops)
        rest_n = sum(c["n"] for c in classes) - sum(c["n"] for c in tops)
        where = " or ".join(describe_class(p, test["factor"], test["period"], c["value"]) for c in tops)
        counts = f"{top['departures']} of {top['n']}"
        if len(tops) > 1:  # a tie: every class at the top rate, with its own counts
            counts = ", ".join(f"{c['departures']} of {c['n']}" for c in tops)
            where += f" (tied at the top rate: {counts})"
            counts = f"{sum(c['departures'] for c in tops)} of {sum(c['n'] for c in tops)}"
        elsewhere = "and nowhere else" if rest_k == 0 else f"against {rest_k} of {rest_n} elsewhere"
        follows = (
            "the length band" if test["factor"] == ["length"] else " or ".join(FACTORS[f].words for f in test["factor"])
        )
        between = ", between contents" if test.get("kind") == "between" else ""
        unit = test.get("units", "records")  # requests: the teacher-forced answer's tokens, each its own request
        return (
            f"{what} on {counts} {unit} whose {where}, {elsewhere} "
            f"(the departures follow {follows}{between}: {p_text(adjusted)}, Holm over the tests made"
            f"{_also_words(p, test.get('also'))})"
        )
    if test.get("p_value") is None:
        why = test.get("note") or "too few to test"
        return f"{what} on {k} of {n} records ({why})"
    return (
        f"{what} on {k} of {n} records, following no factor tested "
        f"({p_text(adjusted if adjusted is not None else test['p_value'])} over the needle's, the prompt end's and "
        "the distance's phase at every candidate period" + (" and the length band" if len(p.bands) > 1 else "") + ")"
    )


def _also_words(p: Pairs, also: dict | None) -> str:
    """'; within it, the length band (length band is 4,096 tokens: 40 of 60; p = 0.002)'."""
    if not also:
        return ""
    top = most_departing(also["classes"])[0]
    follows = (
        "the length band" if also["factor"] == ["length"] else " or ".join(FACTORS[f].words for f in also["factor"])
    )
    where = describe_class(p, also["factor"], also["period"], top["value"])
    return f"; within it, {follows} ({where}: {top['departures']} of {top['n']}; {p_text(also['p_value'])})"


def pairs_from_records(pairs: list, bands_of=None) -> Pairs:
    """``Pairs`` from (A record, B record) pairs (``paired.pair_records``), or from B records alone
    (A: the known answer, right with log-prob 0) when each pair's first element is None."""
    ref = [y for _, y in pairs]
    step = ref[0].step
    aligns = {r.align for r in ref if r.align is not None}
    align = aligns.pop() if len(aligns) == 1 else 0
    contents = sorted({r.content_id for r in ref}, key=str)
    index = {c: i for i, c in enumerate(contents)}
    band_values = [getattr(r, "context_tokens", None) for r in ref]
    bands = sorted({b for b in band_values if b is not None}) or [None]
    band_index = {b: i for i, b in enumerate(bands)}
    anchor = np.array([r.anchor_pos if r.anchor_pos is not None else -1 for r in ref], dtype=np.int64)
    answer = np.array([r.answer_pos if r.answer_pos is not None else 0 for r in ref], dtype=np.int64)
    if (anchor >= 0).all() and all(r.answer_pos is not None for r in ref):
        positions = {name: f.position(anchor, answer, align) for name, f in FACTORS.items()}
        periods = candidate_periods(step)
    else:  # no positions: the needle's phase only, at the step's divisors
        phase = np.array([r.phase for r in ref], dtype=np.int64)
        end = answer - align
        positions = {"needle": phase, "end": end, "distance": end - phase}
        periods = [q for q in candidate_periods(step) if step % q == 0]
    a_correct = np.array([True if x is None else bool(x.correct) for x, _ in pairs])
    a_logprob = np.array([np.nan if x is None else float(x.logprob_target) for x, _ in pairs])
    out = Pairs(
        step=step,
        align=align,
        content=np.array([index[r.content_id] for r in ref], dtype=np.int64),
        band=np.array([band_index.get(b, 0) for b in band_values], dtype=np.int64),
        bands=bands,
        positions=positions,
        periods=periods,
        a_correct=a_correct,
        b_correct=np.array([bool(r.correct) for r in ref]),
        a_logprob=a_logprob,
        b_logprob=np.array([float(r.logprob_target) for r in ref]),
        answer_pos=answer,
        offset=np.array([r.offset for r in ref], dtype=np.int64),
        keys=[list(r.key) for r in ref],
    )
    out.requests = _requests(out, pairs)
    return out


def _requests(p: Pairs, pairs: list) -> dict[str, Pairs]:
    """Each kind's request-level ``Pairs`` where the records' answers are several teacher-forced
    tokens: ``logprob`` when both runs recorded each token's log-prob; ``wrong`` and ``right`` when
    ``correct`` came from teacher forcing (not from one generation request at the prompt's length)
    and both runs recorded each token's greedy answer (A, reference-free: every token right)."""
    tokens = [len(y.token_logprobs or y.token_correct or []) for _, y in pairs]
    if max(tokens, default=0) <= 1:
        return {}
    out = {}
    if all(x is None or x.token_logprobs is not None or not y.token_logprobs for x, y in pairs):
        a = [[np.nan] * len(y.token_logprobs) if x is None else x.token_logprobs for x, y in pairs if y.token_logprobs]
        out["logprob"] = _expand(p, pairs, lambda x, y: y.token_logprobs, a, "logprob")
    teacher = all(y.answer_from != "generation" for _, y in pairs)
    if teacher and all((x is None or x.token_correct is not None) == (y.token_correct is not None) for x, y in pairs):
        a = [[True] * len(y.token_correct) if x is None else x.token_correct for x, y in pairs if y.token_correct]
        out["wrong"] = out["right"] = _expand(p, pairs, lambda x, y: y.token_correct, a, "correct")
    return out


def _expand(p: Pairs, pairs: list, b_of, a_values: list, what: str) -> Pairs:
    """The records as requests: a record with n values (``b_of``) is n rows, row j at prompt length
    answer_pos + j (its own end, distance and length); a record without values stays one row."""
    rows, j, a_vals, b_vals = [], [], [], []
    a_iter = iter(a_values)
    for i, (x, y) in enumerate(pairs):
        values = b_of(x, y)
        if values:
            a_row = next(a_iter)
            rows += [i] * len(values)
            j += list(range(len(values)))
            a_vals += list(a_row)
            b_vals += list(values)
        else:
            rows.append(i)
            j.append(0)
            a_vals.append(p.a_correct[i] if what == "correct" else p.a_logprob[i])
            b_vals.append(p.b_correct[i] if what == "correct" else p.b_logprob[i])
    rows, j = np.array(rows), np.array(j)
    positions = dict(p.positions)
    positions["end"] = p.positions["end"][rows] + j
    positions["distance"] = p.positions["distance"][rows] + j
    positions["needle"] = p.positions["needle"][rows]
    values = {"a_correct": p.a_correct[rows], "b_correct": p.b_correct[rows], "a_logprob": p.a_logprob[rows],
              "b_logprob": p.b_logprob[rows]}  # fmt: skip
    if what == "correct":
        values["a_correct"], values["b_correct"] = np.array(a_vals, dtype=bool), np.array(b_vals, dtype=bool)
    else:
        values["a_logprob"], values["b_logprob"] = np.array(a_vals, dtype=float), np.array(b_vals, dtype=float)
    return Pairs(
        step=p.step,
        align=p.align,
        content=p.content[rows],
        band=p.band[rows],
        bands=p.bands,
        positions=positions,
        periods=p.periods,
        answer_pos=p.answer_pos[rows] + j,
        offset=None if p.offset is None else p.offset[rows],
        keys=[p.keys[i] for i in rows] if p.keys else [],
        **values,
    )


__all__ = ["ALPHA", "DEFAULT_TOLERANCE", "KINDS", "Pairs", "departure_statistics", "pairs_from_records"]
