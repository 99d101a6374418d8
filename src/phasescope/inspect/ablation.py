"""Head interventions (issue #12 part 1): remove attention heads and see which phases suffer.

* The hooks live in ``inspect.heads`` (zero / mean / resample; phasescope models and
  transformers models, DeepSeek-V4's grouped output projection included).
* ``head_statistics``: from per-record differences (ablated − unablated) of the *same* items,
  per phase the mean change with a t 95% interval over contents (a content's records of one
  phase are averaged first: the items are paired), and per head a specialization index
  (max − min over phases of the mean drop), its preferred phase (the phase hurt most) and a
  within-content permutation p-value (each content's phase labels are permuted, contents fixed).
* ``ablation_matrix``: the unablated paired sweep, then the same sweep (same seed → same items)
  once per (layer, head) with that head removed, the statistics above with a Holm correction
  across heads, and the held-out causal check (``causal_contrast``): for each phase φ the k
  heads whose removal hurt φ most *relative to the other phases* on a random half of the
  contents are removed together, and on the other half the per-content contrast
  drop(φ) − mean drop(other phases) is reported with a t interval over contents.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import torch

from phasescope.analysis import intervals
from phasescope.errors import InputError
from phasescope.inspect.heads import MODES, Resample, ablate_heads, check_heads, head_sites, record_means
from phasescope.inspect.kv_heads import check_kv_heads, hide_kv_entries, kv_sites

METRICS = ("accuracy", "logprob")
# what one ablation removes: a query head's output ("head"), or a KV head's compressed entries
# ("kv-entries": hidden from every query head that reads them; inspect/kv_heads.py)
COMPONENTS = ("head", "kv-entries")


def t_summary(values) -> dict:
    """analysis.intervals.t_summary over contents (its n named n_contents, as in ablation.json)."""
    summary = intervals.t_summary(values)
    return {"n_contents": summary.pop("n"), **summary}


def phase_intervals(diffs: np.ndarray, phases: np.ndarray, contents: np.ndarray, step: int) -> list[dict]:
    """Per phase: mean per-content difference, t 95% interval over contents, n contents."""
    out = []
    for p in range(step):
        sel = phases == p
        per_content = np.array([diffs[sel & (contents == c)].mean() for c in np.unique(contents[sel])])
        summary = t_summary(per_content)
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
                "change_by_phase": phase_intervals(d, phases, contents, step),
                **specialization(d, phases, contents, step, rng, n_permutations, offsets),
            }
        rows.append(row)
    for metric in METRICS:
        adjusted = holm([r[metric]["p_value"] for r in rows])
        for r, p in zip(rows, adjusted, strict=True):
            r[metric]["p_holm"] = p
            r[metric]["specialized"] = p is not None and p < alpha
    return rows


def _record_arrays(records: list[dict]):
    keyed = sorted(records, key=lambda r: (r["content_id"], r["offset"], r.get("variant", 0)))
    keys = [(r["content_id"], r["offset"], r.get("variant", 0)) for r in keyed]
    correct = np.array([float(bool(r["correct"])) for r in keyed])
    logprob = np.array([float(r["logprob_target"]) for r in keyed])
    return keys, keyed, correct, logprob


@dataclass
class PairedSweep:
    """The same sweep (same seed, so the same items) with any set of heads removed; differences
    ablated − unablated per record, in the unablated sweep's record order."""

    loaded: object  # LoadedModel
    probe: str
    kwargs: dict
    mode: str
    samples: int
    means: dict | None = None
    base: tuple | None = None
    component: str = "head"

    def run(self, heads: list[tuple[int, int]]) -> list[dict]:
        import phasescope

        if self.component == "kv-entries":
            with torch.no_grad(), hide_kv_entries(self.loaded.module, heads):
                return phasescope.sweep(self.loaded, self.probe, **self.kwargs).records
        resample = Resample()
        loaded = self.loaded
        if self.mode == "resample":  # every batch holds all contents at one offset: donors are the other rows
            loaded = replace(loaded, logits=_shift_per_batch(loaded.logits, self.samples, resample))
        with torch.no_grad(), ablate_heads(loaded.module, heads, self.mode, self.means, resample):
            return phasescope.sweep(loaded, self.probe, **self.kwargs).records

    def baseline(self) -> list[dict]:
        import phasescope

        # mode mean replaces a head by its mean over this sweep's tokens: recorded only then
        recording = record_means(self.loaded.module) if self.mode == "mean" else contextlib.nullcontext()
        with torch.no_grad(), recording as means:
            records = phasescope.sweep(self.loaded, self.probe, **self.kwargs).records
        self.means = means
        self.base = _record_arrays(records)
        return self.base[1]

    def diffs(self, heads: list[tuple[int, int]]) -> dict[str, np.ndarray]:
        keys, _, correct, logprob = self.base
        a_keys, _, a_correct, a_logprob = _record_arrays(self.run(heads))
        if a_keys != keys:
            raise RuntimeError("the ablated sweep scored different items than the unablated one")
        return {"accuracy": a_correct - correct, "logprob": a_logprob - logprob}


def _shift_per_batch(logits, samples: int, resample: Resample):
    """Resample donors: a batch of every content at one offset has ``samples`` x (rows per item)
    rows, item-major, so the same candidate of the previous content is that many rows back."""

    def shifted(ids: torch.Tensor) -> torch.Tensor:
        if ids.shape[0] % samples:
            rows = ids.shape[0]
            raise RuntimeError(f"internal: a resample batch of {rows} rows does not hold all {samples} contents")
        resample.shift = ids.shape[0] // samples
        return logits(ids)

    return shifted


def ablation_matrix(
    model,
    probe: str = "kv-retrieval",
    *,
    offsets=range(8),
    samples: int = 20,
    mode: str = "zero",
    layers: Iterable[int] | None = None,
    seed: int = 0,
    top_k: int = 1,
    n_permutations: int = 300,
    alpha: float = 0.05,
    batch_size: int | None = None,
    progress: bool = False,
    options=None,
    component: str = "head",
    **sweep_options,
) -> dict:
    """Every (layer, head) of ``layers`` (default all) removed in turn, the same paired sweep each
    time (``phasescope.sweep`` with ``probe`` and ``sweep_options``: task, step, design, ...);
    changes vs the unablated sweep per phase, specialization per head, and the held-out causal
    contrast of the ``top_k`` heads per phase. ``model``: anything ``phasescope.sweep`` takes
    whose weights live in this process (a phasescope model dir, ``hf:DIR``, a module).
    ``component="kv-entries"``: the units are (layer, KV head) of the compressed layers, each
    removed by hiding its entries (``inspect.kv_heads``); only mode "zero" applies."""
    from phasescope.api import resolve_model

    if mode not in MODES:
        raise InputError(f"mode={mode!r} is invalid; allowed: {', '.join(MODES)}")
    if component not in COMPONENTS:
        raise InputError(f"component={component!r} is invalid; allowed: {', '.join(COMPONENTS)}")
    if component == "kv-entries" and mode != "zero":
        raise InputError(
            f"mode={mode!r} does not apply to component kv-entries: a KV head's entries are hidden (mode zero); "
            "mean and resample replace a query head's output"
        )
    if mode == "resample" and samples < 2:
        raise InputError("mode resample takes each head's output from another content: use samples >= 2")
    loaded = resolve_model(model, options)
    heads = _units(loaded.module, component, layers)
    if not 1 <= top_k < len(heads):
        raise InputError(f"top_k={top_k} is invalid; allowed: 1 .. {len(heads) - 1} (fewer than the heads ablated)")
    kwargs = dict(offsets=list(offsets), samples=samples, seed=seed, **sweep_options)
    if mode == "resample":  # plain batches of every content at one offset (donor = another content)
        kwargs.update(prefix_reuse=False, batch_size=samples)
    elif batch_size is not None:
        kwargs["batch_size"] = batch_size
    paired = PairedSweep(loaded, probe, kwargs, mode, samples, component=component)
    base_records = paired.baseline()
    phases = np.array([r["phase"] for r in base_records])
    contents = np.array([r["content_id"] for r in base_records])
    step = int(base_records[0]["step"])
    per_head = {pair: paired.diffs([pair]) for pair in _progress(heads, progress, "removing one head at a time")}
    offsets_of = np.array([r["offset"] for r in base_records])
    rows = head_statistics(per_head, phases, contents, step, seed, n_permutations, alpha, offsets_of)
    causal = causal_contrast(paired, per_head, phases, contents, step, top_k, seed, progress, offsets_of)
    correct = paired.base[2]
    baseline = [
        {"phase": p, "accuracy": float(correct[phases == p].mean()) if (phases == p).any() else None}
        for p in range(step)
    ]
    return {
        "model": loaded.description,
        "probe": probe,
        "component": component,
        "mode": mode,
        "step": step,
        "offsets": list(offsets),
        "samples": samples,
        "seed": seed,
        "top_k": top_k,
        "n_permutations": n_permutations,
        "alpha": alpha,
        "baseline": baseline,
        "heads": rows,
        "causal": causal,
        "note": "change = ablated − unablated on the same items; drop = −change; index = max − min over phases "
        "of the mean drop after removing a linear drift over offsets; p: within-content permutation of phase "
        "labels, Holm-corrected across heads; causal: top-k heads per phase chosen on half of the contents, "
        "contrast = drop(phase) − mean drop(other phases) on the other half, t interval over those contents",
    }


def _units(module, component: str, layers) -> list[tuple[int, int]]:
    """Every (layer, head) — or (layer, KV head) of the compressed layers — of ``layers`` (default all);
    a bad layer is refused before any sweep."""
    if component == "kv-entries":
        sites = kv_sites(module)
        layer_list = [i for i, site in enumerate(sites) if site is not None] if layers is None else list(layers)
        check_kv_heads(sites, [(int(layer), 0) for layer in layer_list])
    else:
        sites = head_sites(module)
        layer_list = list(range(len(sites))) if layers is None else list(layers)
        check_heads(sites, [(int(layer), 0) for layer in layer_list])
    return [(int(layer), h) for layer in layer_list for h in range(sites[int(layer)].n_heads)]


def _progress(items: list, enabled: bool, description: str):
    if not enabled:
        return items
    from rich.progress import track

    return track(items, description=description)


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


def causal_contrast(
    paired: PairedSweep,
    per_head: dict,
    phases,
    contents,
    step: int,
    k: int,
    seed: int,
    progress: bool = False,
    offsets=None,
):
    """Per phase φ: the top-k heads for φ chosen on one half of the contents, removed together;
    on the other half, drop(φ) − mean drop(other phases) per content with a t interval. Each
    half's differences lose their own linear drift over ``offsets`` first (``detrend``)."""
    chosen_on, tested_on = split_contents(contents, seed)
    if len(chosen_on) < 2 or len(tested_on) < 2:
        return []
    pick = np.isin(contents, chosen_on)
    test = np.isin(contents, tested_on)

    def half(diffs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return detrend(diffs[mask], None if offsets is None else offsets[mask], phases[mask], step)

    selection = {pair: {m: half(d[m], pick) for m in METRICS} for pair, d in per_head.items()}
    out = []
    for phase in _progress(list(range(step)), progress, f"removing the top {k} heads of each phase"):
        heads = top_heads(selection, phases[pick], contents[pick], step, phase, k)
        diffs = paired.diffs(heads)
        row = {"phase": phase, "k": k, "heads": [list(h) for h in heads], "chosen_on": len(chosen_on)}
        tested = {m: phase_contrast(half(diffs[m], test), phases[test], contents[test], step, phase) for m in METRICS}
        accuracy = t_summary(tested["accuracy"])
        row.update(contrast=accuracy.pop("mean"), **accuracy)
        row["logprob"] = t_summary(tested["logprob"])
        out.append(row)
    for row, p in zip(out, holm([row["p_value"] for row in out]), strict=True):  # one test per phase
        row["p_holm"] = p
    return out
