"""Head interventions (issue #12 part 1): remove single attention heads and see which phases suffer.

* ``ablate_heads(model, heads, mode)``: a context manager. A forward *pre*-hook on each
  affected layer's output projection (``o_proj``) replaces head h's D columns of its input
  [B,T,H*D] with zeros (``"zero"``) or with that slice's mean over a reference batch
  (``"mean"``, see ``head_means``). Hooks are always removed on exit, exception or not.
* ``head_statistics``: from per-record differences (ablated − unablated) of the *same* items,
  per phase the mean change with a t 95% interval over contents (a content's records of one
  phase are averaged first: the items are paired), and per head a specialization index
  (max − min over phases of the mean drop), its preferred phase (the phase hurt most) and a
  within-content permutation p-value (each content's phase labels are permuted, contents fixed).
* ``ablation_matrix``: the unablated paired sweep, then the same sweep (same seed → same items)
  once per (layer, head) with that head removed, and the statistics above with a Holm
  correction across heads.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Iterator

import numpy as np
import torch

from phasescope.errors import InputError

MODES = ("zero", "mean")
METRICS = ("accuracy", "logprob")


def _check_heads(model, heads) -> list[tuple[int, int]]:
    out = []
    for pair in heads:
        layer, head = (int(v) for v in pair)
        if not 0 <= layer < len(model.blocks):
            raise InputError(f"layer {layer} is invalid; the model has layers 0..{len(model.blocks) - 1}")
        n_heads = model.blocks[layer].attn.n_heads
        if not 0 <= head < n_heads:
            raise InputError(f"head {head} of layer {layer} is invalid; the layer has heads 0..{n_heads - 1}")
        out.append((layer, head))
    return out


@contextlib.contextmanager
def _o_proj_inputs(model) -> Iterator[dict[int, list[torch.Tensor]]]:
    """Records every layer's o_proj input summed over batch and tokens, with the token count."""
    sums: dict[int, list] = {}
    handles = []

    def hook(layer):
        def record(module, args):
            x = args[0].detach().float()
            acc = sums.setdefault(layer, [torch.zeros(x.shape[-1], dtype=torch.float64), 0])
            acc[0] += x.reshape(-1, x.shape[-1]).sum(0).double().cpu()
            acc[1] += x.shape[0] * x.shape[1]

        return record

    try:
        for i, block in enumerate(model.blocks):
            handles.append(block.attn.o_proj.register_forward_pre_hook(hook(i)))
        yield sums
    finally:
        for handle in handles:
            handle.remove()


def head_means(model, reference_ids: torch.Tensor, batch_size: int = 16) -> dict[int, torch.Tensor]:
    """Per layer: the mean o_proj input over every token of ``reference_ids`` [R,T], as [H, D]."""
    with torch.no_grad(), _o_proj_inputs(model) as sums:
        for b0 in range(0, reference_ids.shape[0], batch_size):
            model(reference_ids[b0 : b0 + batch_size])
    out = {}
    for layer, (total, count) in sums.items():
        attn = model.blocks[layer].attn
        out[layer] = (total / max(count, 1)).float().view(attn.n_heads, attn.head_dim)
    return out


@contextlib.contextmanager
def ablate_heads(
    model,
    heads: Iterable[tuple[int, int]],
    mode: str = "zero",
    means: dict[int, torch.Tensor] | None = None,
    reference_ids: torch.Tensor | None = None,
) -> Iterator[None]:
    """Remove the attention output of each (layer, head) of a phasescope ``Decoder`` inside the block.

    mode "zero": head h's slice of o_proj's input is zeroed. mode "mean": it is replaced by its
    mean over a reference batch — ``means`` (``head_means`` output, per layer [H, D]) or computed
    once here from ``reference_ids``.
    """
    if mode not in MODES:
        raise InputError(f"mode={mode!r} is invalid; allowed: {', '.join(MODES)}")
    heads = _check_heads(model, heads)
    if mode == "mean" and means is None:
        if reference_ids is None:
            raise InputError('mode="mean" needs means=head_means(...) or reference_ids')
        means = head_means(model, reference_ids)
    by_layer: dict[int, list[int]] = {}
    for layer, head in heads:
        by_layer.setdefault(layer, []).append(head)

    def pre_hook(layer: int, head_list: list[int]):
        attn = model.blocks[layer].attn
        d = attn.head_dim

        def replace(module, args):
            x = args[0].clone()
            for h in head_list:
                if mode == "zero":
                    x[..., h * d : (h + 1) * d] = 0
                else:
                    x[..., h * d : (h + 1) * d] = means[layer][h].to(device=x.device, dtype=x.dtype)
            return (x, *args[1:])

        return replace

    handles = []
    try:
        for layer, head_list in by_layer.items():
            o_proj = model.blocks[layer].attn.o_proj
            handles.append(o_proj.register_forward_pre_hook(pre_hook(layer, head_list)))
        yield
    finally:
        for handle in handles:
            handle.remove()


def phase_intervals(diffs: np.ndarray, phases: np.ndarray, contents: np.ndarray, step: int) -> list[dict]:
    """Per phase: mean per-content difference, t 95% interval over contents, n contents."""
    from scipy.stats import t as student_t

    out = []
    for p in range(step):
        sel = phases == p
        per_content = np.array([diffs[sel & (contents == c)].mean() for c in np.unique(contents[sel])])
        n = len(per_content)
        row = {"phase": p, "n_contents": n, "mean": None, "ci_low": None, "ci_high": None}
        if n:
            mean = float(per_content.mean())
            row["mean"] = mean
            if n > 1:
                half = float(student_t.ppf(0.975, n - 1) * per_content.std(ddof=1) / np.sqrt(n))
                row["ci_low"], row["ci_high"] = mean - half, mean + half
        out.append(row)
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


def specialization(
    diffs: np.ndarray,
    phases: np.ndarray,
    contents: np.ndarray,
    step: int,
    rng: np.random.Generator,
    n_permutations: int = 300,
) -> dict:
    """Index = max − min over phases of the mean drop; preferred phase = argmax drop; p-value by
    permuting each content's phase labels (contents fixed), (1 + #{perm >= obs}) / (1 + B)."""
    diffs, phases, contents = (np.asarray(a) for a in (diffs, phases, contents))
    obs = _phase_drops(diffs.astype(float), phases[None], contents, step)[0]
    present = np.isfinite(obs)
    if present.sum() < 2:
        return {"index": None, "preferred_phase": None, "p_value": None, "drop_by_phase": obs.tolist()}
    index = float(np.nanmax(obs) - np.nanmin(obs))
    perm = np.tile(phases, (n_permutations, 1))
    for c in np.unique(contents):
        sel = np.flatnonzero(contents == c)
        perm[:, sel] = rng.permuted(perm[:, sel], axis=1)
    null = _phase_drops(diffs.astype(float), perm, contents, step)
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
) -> list[dict]:
    """per_head[(layer, head)] = {"accuracy": diffs, "logprob": diffs} (ablated − unablated per
    record, aligned with ``phases`` and ``contents``) -> one row per head with per-phase changes
    and intervals, and per metric the specialization index, preferred phase, p-value and the
    Holm-corrected p-value across heads; ``specialized`` when the corrected p < alpha."""
    rng = np.random.default_rng(seed)
    rows = []
    for (layer, head), diffs in per_head.items():
        row = {"layer": layer, "head": head}
        for metric in METRICS:
            d = np.asarray(diffs[metric], dtype=float)
            row[metric] = {
                "change_by_phase": phase_intervals(d, phases, contents, step),
                **specialization(d, phases, contents, step, rng, n_permutations),
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


def ablation_matrix(
    model,
    task,
    offsets=range(8),
    samples: int = 20,
    step: int | None = None,
    *,
    mode: str = "zero",
    layers: Iterable[int] | None = None,
    seed: int = 0,
    design: str = "shift-needle",
    reference_ids: torch.Tensor | None = None,
    n_permutations: int = 300,
    alpha: float = 0.05,
    batch_size: int | None = None,
) -> dict:
    """Every (layer, head) of ``layers`` (default all) of a phasescope ``Decoder`` removed in turn;
    the same paired kv-retrieval sweep each time; changes vs the unablated sweep per phase."""
    import phasescope

    layer_list = list(range(len(model.blocks))) if layers is None else [int(v) for v in layers]
    _check_heads(model, [(lay, 0) for lay in layer_list])  # refuses a bad layer before any sweep
    heads = [(lay, h) for lay in layer_list for h in range(model.blocks[lay].attn.n_heads)]
    kwargs = dict(task=task, offsets=list(offsets), samples=samples, step=step, seed=seed, design=design)
    if batch_size is not None:
        kwargs["batch_size"] = batch_size
    with torch.no_grad():
        base = phasescope.sweep(model, **kwargs)
    keys, base_records, base_correct, base_logprob = _record_arrays(base.records)
    phases = np.array([r["phase"] for r in base_records])
    contents = np.array([r["content_id"] for r in base_records])
    step_used = int(base_records[0]["step"])
    means = None
    if mode == "mean":
        if reference_ids is None:
            rng = np.random.default_rng(seed + 1)
            from phasescope.data.retrieval import sample_batch

            reference_ids = torch.as_tensor(sample_batch(task, 16, rng).input_ids, dtype=torch.long)
        means = head_means(model, reference_ids)
    per_head = {}
    for pair in heads:
        with torch.no_grad(), ablate_heads(model, [pair], mode=mode, means=means):
            ablated = phasescope.sweep(model, **kwargs)
        a_keys, _, a_correct, a_logprob = _record_arrays(ablated.records)
        if a_keys != keys:
            raise RuntimeError("the ablated sweep scored different items than the unablated one")
        per_head[pair] = {"accuracy": a_correct - base_correct, "logprob": a_logprob - base_logprob}
    rows = head_statistics(per_head, phases, contents, step_used, seed, n_permutations, alpha)
    baseline = [
        {"phase": p, "accuracy": float(base_correct[phases == p].mean()) if (phases == p).any() else None}
        for p in range(step_used)
    ]
    return {
        "mode": mode,
        "step": step_used,
        "offsets": list(offsets),
        "samples": samples,
        "seed": seed,
        "n_permutations": n_permutations,
        "alpha": alpha,
        "baseline": baseline,
        "heads": rows,
        "note": "change = ablated − unablated on the same items; drop = −change; index = max − min over phases "
        "of the mean drop; p: within-content permutation of phase labels, Holm-corrected across heads",
    }
