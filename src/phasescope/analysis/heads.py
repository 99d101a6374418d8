"""Statistics of head interventions (``phasescope ablate``), on per-record differences
(ablated − unablated) of the same items; torch-free, so they are tested and reused without a model.

* ``head_statistics``: per phase the mean change with a t 95% interval over contents (a content's
  records of one phase are averaged first: the items are paired), and per head a specialization
  index (max − min over phases of the mean drop, after removing a linear drift over offsets,
  ``detrend``), its preferred phase and a within-content permutation p-value, Holm-corrected
  across heads (``holm``).
* The held-out causal check's pieces: ``split_contents`` (a half to choose heads on, a half to
  test them on), ``top_heads`` and ``phase_contrast`` (drop at a phase − mean drop at the others).

Shape legend: N records, B permutations, P phases.
"""

from __future__ import annotations

import warnings

import numpy as np

from phasescope.analysis import intervals

METRICS = ("accuracy", "logprob")


# the range a change in accuracy (ablated − unablated) and a contrast of two drops can take
ACCURACY_CHANGE = (-1.0, 1.0)
ACCURACY_CONTRAST = (-2.0, 2.0)


def t_summary(values, bounds: tuple[float, float] | None = None) -> dict:
    """analysis.intervals.t_summary over contents (its n named n_contents, as in ablation.json);
    ``bounds``: the range the quantity can take, which the interval is clipped to (with two or
    three contents a t interval can reach ±400 pp of accuracy, a range no change can have)."""
    summary = intervals.t_summary(values)
    if bounds is not None and summary["ci_low"] is not None:
        summary["ci_low"] = max(summary["ci_low"], bounds[0])
        summary["ci_high"] = min(summary["ci_high"], bounds[1])
    return {"n_contents": summary.pop("n"), **summary}


def phase_intervals(
    diffs: np.ndarray, phases: np.ndarray, contents: np.ndarray, step: int, bounds: tuple[float, float] | None = None
) -> list[dict]:
    """Per phase: mean per-content difference, t 95% interval over contents (clipped to
    ``bounds``), n contents."""
    out = []
    for p in range(step):
        sel = phases == p
        per_content = np.array([diffs[sel & (contents == c)].mean() for c in np.unique(contents[sel])])
        summary = t_summary(per_content, bounds)
        del summary["p_value"]
        out.append({"phase": p, **summary})
    return out


def _phase_drops(diffs: np.ndarray, labels: np.ndarray, contents: np.ndarray, step: int) -> np.ndarray:
    """labels [B,N] -> mean over contents of the per-content mean drop (−diff) per phase, [B,step]."""
    onehot = labels[..., None] == np.arange(step)  # [B,N,P]
    per_content = []
    for c in np.unique(contents):
        sel = contents == c
        oh = onehot[:, sel]
        counts = oh.sum(axis=1)  # [B,P]
        sums = np.einsum("bnp,n->bp", oh, -diffs[sel])
        with np.errstate(invalid="ignore", divide="ignore"):
            per_content.append(np.where(counts > 0, sums / np.maximum(counts, 1), np.nan))
    with warnings.catch_warnings():  # a phase no content has: nan, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(np.stack(per_content), axis=0)


def detrend(diffs: np.ndarray, offsets: np.ndarray | None, phases: np.ndarray, step: int) -> np.ndarray:
    """``diffs`` minus the linear drift over offsets, fitted jointly with one level per phase (so a
    periodic phase effect is not absorbed: it has no within-phase slope). Without ``offsets``,
    ``diffs`` unchanged. Why: a head whose removal hurts far needles more than near ones would
    otherwise look like it prefers the late phases (phase follows the offset)."""
    if offsets is None:
        return diffs
    offsets = np.asarray(offsets, dtype=float)
    if np.ptp(offsets) == 0:
        return diffs
    design = np.column_stack([offsets, *(phases == p for p in range(step))]).astype(float)
    coef = np.linalg.lstsq(design, diffs, rcond=None)[0]
    return diffs - coef[0] * (offsets - offsets.mean())


def specialization(
    diffs: np.ndarray,
    phases: np.ndarray,
    contents: np.ndarray,
    step: int,
    rng: np.random.Generator,
    n_permutations: int = 300,
    offsets: np.ndarray | None = None,
) -> dict:
    """Index = max − min over phases of the mean drop (after removing a linear drift over
    ``offsets``, see ``detrend``); preferred phase = argmax drop; p-value by permuting each
    content's phase labels (contents fixed, the drift refitted for each), (1 + #{perm >= obs}) / (1 + B)."""
    diffs, phases, contents = (np.asarray(a) for a in (diffs, phases, contents))
    raw = diffs.astype(float)
    obs = _phase_drops(detrend(raw, offsets, phases, step), phases[None], contents, step)[0]
    present = np.isfinite(obs)
    if present.sum() < 2:
        return {"index": None, "preferred_phase": None, "p_value": None, "drop_by_phase": obs.tolist()}
    index = float(np.nanmax(obs) - np.nanmin(obs))
    perm = np.tile(phases, (n_permutations, 1))
    for c in np.unique(contents):
        sel = np.flatnonzero(contents == c)
        perm[:, sel] = rng.permuted(perm[:, sel], axis=1)
    if offsets is None:
        null = _phase_drops(raw, perm, contents, step)
    else:  # the drift is refitted with each permutation's labels, as it was with the observed ones
        null = np.stack([_phase_drops(detrend(raw, offsets, lab, step), lab[None], contents, step)[0] for lab in perm])
    null_index = np.nanmax(null, axis=1) - np.nanmin(null, axis=1)
    p = (1 + int(np.sum(null_index >= index - 1e-12))) / (1 + n_permutations)
    return {
        "index": index,
        "preferred_phase": int(np.nanargmax(obs)),
        "p_value": float(p),
        "drop_by_phase": [float(v) if np.isfinite(v) else None for v in obs],
    }


def holm(p_values: list[float | None]) -> list[float | None]:
    """Holm step-down adjusted p-values (None stays None)."""
    idx = [i for i, p in enumerate(p_values) if p is not None]
    order = sorted(idx, key=lambda i: p_values[i])
    m, out, running = len(order), list(p_values), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        out[i] = running
    return out


def head_statistics(
    per_head: dict[tuple[int, int], dict[str, np.ndarray]],
    phases: np.ndarray,
    contents: np.ndarray,
    step: int,
    seed: int = 0,
    n_permutations: int = 300,
    alpha: float = 0.05,
    offsets: np.ndarray | None = None,
) -> list[dict]:
    """per_head[(layer, head)] = {"accuracy": diffs, "logprob": diffs} (ablated − unablated per
    record, aligned with ``phases``, ``contents`` and ``offsets``) -> one row per head with per-phase
    changes and intervals (raw), and per metric the specialization index (drift over offsets
    removed), preferred phase, p-value and the Holm-corrected p-value across heads;
    ``specialized`` when the corrected p < alpha."""
    rng = np.random.default_rng(seed)
    rows = []
    for (layer, head), diffs in per_head.items():
        row = {"layer": layer, "head": head}
        for metric in METRICS:
            d = np.asarray(diffs[metric], dtype=float)
            row[metric] = {
                "change_by_phase": phase_intervals(
                    d, phases, contents, step, ACCURACY_CHANGE if metric == "accuracy" else None
                ),
                **specialization(d, phases, contents, step, rng, n_permutations, offsets),
            }
        rows.append(row)
    for metric in METRICS:
        adjusted = holm([r[metric]["p_value"] for r in rows])
        for r, p in zip(rows, adjusted, strict=True):
            r[metric]["p_holm"] = p
            r[metric]["specialized"] = p is not None and p < alpha
    return rows


def phase_contrast(diffs: np.ndarray, phases: np.ndarray, contents: np.ndarray, step: int, phase: int) -> np.ndarray:
    """Per content (having ``phase`` and another phase): drop at ``phase`` − mean drop at the
    other phases it has, where drop = −(ablated − unablated)."""
    out = []
    for c in np.unique(contents):
        mine = contents == c
        drops = {p: -diffs[mine & (phases == p)].mean() for p in range(step) if (mine & (phases == p)).any()}
        others = [v for p, v in drops.items() if p != phase]
        if phase in drops and others:
            out.append(drops[phase] - float(np.mean(others)))
    return np.array(out)


def split_contents(contents: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random half of the contents to choose heads on, the other half to test them on."""
    ids = np.random.default_rng([seed, 12]).permutation(np.unique(contents))
    half = len(ids) // 2
    return np.sort(ids[:half]), np.sort(ids[half:])


def top_heads(per_head: dict, phases, contents, step: int, phase: int, k: int) -> list[tuple[int, int]]:
    """The k heads whose removal hurt ``phase`` most relative to the other phases (accuracy,
    log-prob breaking ties), on the records given."""

    def score(pair):
        d = per_head[pair]
        return tuple(float(phase_contrast(d[m], phases, contents, step, phase).mean()) for m in METRICS)

    return sorted(per_head, key=lambda pair: (tuple(-v for v in score(pair)), pair))[:k]
