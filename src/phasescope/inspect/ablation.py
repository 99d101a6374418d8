"""Head interventions (issue #12 part 1): remove attention heads and see which phases suffer.

Shape legend: N records of a sweep (in key order), B rows in a batch, T tokens, V vocabulary.

* The hooks live in ``inspect.heads`` (zero / mean / resample; phasescope models and
  transformers models, DeepSeek-V4's grouped output projection included).
* The statistics live in ``analysis.heads`` (torch-free): ``head_statistics`` per phase and
  per head (specialization index, preferred phase, within-content permutation p, Holm).
* ``ablation_matrix``: the unablated paired sweep, then the same sweep (same seed → same items)
  once per (layer, head) with that head removed, the statistics above with a Holm correction
  across heads, and the held-out causal check (``causal_contrast``): for each phase φ the k
  heads whose removal hurt φ most *relative to the other phases* on a random half of the
  contents are removed together, and on the other half the per-content contrast
  drop(φ) − mean drop(other phases) is reported with a t interval over contents.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np
import torch

from phasescope.analysis.heads import (
    ACCURACY_CONTRAST,
    METRICS,
    detrend,
    head_statistics,
    holm,
    phase_contrast,
    split_contents,
    t_summary,
    top_heads,
)
from phasescope.errors import InputError
from phasescope.inspect.heads import MODES, Resample, ablate_heads, check_heads, head_sites, record_means
from phasescope.inspect.kv_heads import check_kv_heads, hide_kv_entries, kv_sites
from phasescope.rundir.records import Record

# what one ablation removes: a query head's output ("head"), or a KV head's compressed entries
# ("kv-entries": hidden from every query head that reads them; inspect/kv_heads.py)
COMPONENTS = ("head", "kv-entries")


def _record_arrays(records: list[Record]):
    """(keys, records, correct [N], logprob [N]), all in key order."""
    keyed = sorted(records, key=lambda r: r.key)
    keys = [r.key for r in keyed]
    correct = np.array([float(r.correct) for r in keyed])
    logprob = np.array([float(r.logprob_target) for r in keyed])
    return keys, keyed, correct, logprob


@dataclass
class PairedSweep:
    """The same sweep (same seed, so the same items) with any set of heads removed; differences
    ablated − unablated per record ([N]), in the unablated sweep's record order."""

    loaded: object  # LoadedModel
    probe: str
    kwargs: dict
    mode: str
    samples: int
    means: dict | None = None
    base: tuple | None = None
    component: str = "head"

    def run(self, heads: list[tuple[int, int]]) -> list[Record]:
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

    def baseline(self) -> list[Record]:
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

    def shifted(ids: torch.Tensor) -> torch.Tensor:  # ids [B,T] -> logits [B,T,V]
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
    from phasescope.backends import resolve_model

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
    unit = "KV heads" if component == "kv-entries" else "heads"
    if len(heads) < 2:
        raise InputError(
            f"{len(heads)} {unit} to ablate in {'every layer' if layers is None else f'layers {list(layers)}'}: the "
            f"held-out check compares {unit} with each other and needs 2 or more; name more layers"
            + (" (or use --component head)" if component == "kv-entries" else "")
        )
    if not 1 <= top_k < len(heads):
        raise InputError(f"top_k={top_k} is invalid; allowed: 1 .. {len(heads) - 1} (fewer than the heads ablated)")
    kwargs = dict(offsets=list(offsets), samples=samples, seed=seed, **sweep_options)
    if mode == "resample":  # plain batches of every content at one offset (donor = another content)
        kwargs.update(prefix_reuse=False, batch_size=samples)
    elif batch_size is not None:
        kwargs["batch_size"] = batch_size
    paired = PairedSweep(loaded, probe, kwargs, mode, samples, component=component)
    base_records = paired.baseline()
    phases = np.array([r.phase for r in base_records])  # [N], as contents and offsets_of
    contents = np.array([r.content_id for r in base_records])
    step = base_records[0].step
    per_head = {pair: paired.diffs([pair]) for pair in _progress(heads, progress, "removing one head at a time")}
    offsets_of = np.array([r.offset for r in base_records])
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
        accuracy = t_summary(tested["accuracy"], ACCURACY_CONTRAST)
        row.update(contrast=accuracy.pop("mean"), **accuracy)
        row["logprob"] = t_summary(tested["logprob"])
        out.append(row)
    for row, p in zip(out, holm([row["p_value"] for row in out]), strict=True):  # one test per phase
        row["p_holm"] = p
    return out
