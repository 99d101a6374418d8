"""Learned position preferences of transformers' ``DeepseekV4ForCausalLM`` compressors.

Shape legend: B rows in a batch, T tokens, s step (``compress_rate``), N = T // s entries,
w window slots (CSA 2s, HCA s; slot 0 = oldest), D head dim (an indexer's: index_head_dim),
C gate channels (CSA 2D, HCA D).

The same report as ``preferences.py`` gives for a phasescope model, for every compressed layer
of a transformers DeepSeek-V4 (a sliding-only layer has no compressor and is skipped). A V4
model has one KV head, so every per-head list has one row.

Window slots, read off transformers' ``DeepseekV4CSACompressor`` / ``DeepseekV4HCACompressor``
(``modeling_deepseek_v4.py``). Entry j pools the tokens of its own step block
``j*s .. j*s+s-1`` (s = ``compress_rate``) and, in CSA, also the previous block:

* CSA (overlap, window w = 2s): ``kv_proj`` / ``gate_proj`` / ``position_bias [s, 2D]`` give
  every token two series, Ca = channels ``[:D]`` (read by the *next* entry) and Cb =
  ``[D:]`` (read by its own entry). Slots 0..s-1 are the Ca half: the previous block's tokens
  ``(j-1)*s + k``, with bias ``position_bias[k, :D]``; slots s..2s-1 are the Cb half: the
  current block's tokens ``j*s + k - s``, with bias ``position_bias[k - s, D:]``. Entry 0 has
  no previous block (its Ca half gets gate -inf, weight 0): it is a partial window and, as for
  phasescope models, left out of the effective weights.
* HCA (w = s): slot k is the block's token ``j*s + k``, bias ``position_bias[k, :]``.

Either way slot k holds a token of phase ``k mod s`` (align 0) — the ``(k - w) mod s`` of
``preferences.slot_phase`` — and the last slot is the boundary phase s-1.

Per slot: ``learned`` is ``position_bias`` averaged over the slot's D channels (a logit bias)
and ``learned_weight`` the softmax over the window of ``position_bias`` alone, per channel, then
averaged over channels — the weight a slot would get if every gate logit were equal.
``effective``: a forward hook on each compressor recomputes ``gate_proj(x) + position_bias``
from the compressor's input exactly as transformers lays it out, takes the softmax over the
window per channel, and averages over channels, over the full windows of a row, then reports
mean, std and a bootstrap 95% interval over rows. CSA layers also carry the same numbers for
their lightning indexer's own compressor (``indexer``): it only scores which entries the top-k
keeps, so with ``index_topk`` at or above the entry count (phasescope's tiny recipe) it does not
change the output.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np
import torch

from phasescope.inspect.slot_stats import slot_phase, summarise_rows


def hf_model_of(model):
    """The transformers model inside phasescope's training wrapper (HFCausalLM), or the model itself."""
    return getattr(model, "hf", model)


def is_deepseek_v4(model) -> bool:
    from transformers import DeepseekV4ForCausalLM, DeepseekV4Model

    return isinstance(hf_model_of(model), (DeepseekV4ForCausalLM, DeepseekV4Model))


def compressors(model) -> list[tuple[int, object, bool]]:
    """(layer index, compressor module, overlap) for every layer with a compressor."""
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import (
        DeepseekV4CSACompressor,
        DeepseekV4HCACompressor,
    )

    if not is_deepseek_v4(model):
        raise TypeError(
            f"{type(model).__name__} is neither a phasescope Decoder nor a transformers DeepseekV4 model: "
            "no compressor preferences to read"
        )
    hf = hf_model_of(model)
    layers = getattr(hf, "model", hf).layers
    out = []
    for i, layer in enumerate(layers):
        comp = getattr(layer.self_attn, "compressor", None)
        if comp is None:
            continue
        if not isinstance(comp, (DeepseekV4CSACompressor, DeepseekV4HCACompressor)):
            raise TypeError(f"layer {i}: unknown DeepseekV4 compressor {type(comp).__name__}")
        out.append((i, comp, isinstance(comp, DeepseekV4CSACompressor)))
    return out


def slot_bias(position_bias: torch.Tensor, overlap: bool) -> torch.Tensor:
    """position_bias [s, C] -> the bias of each window slot [w, D] (CSA: Ca half, then Cb half)."""
    bias = position_bias.detach().float()
    if not overlap:
        return bias
    d = bias.shape[1] // 2
    return torch.cat([bias[:, :d], bias[:, d:]], dim=0)


def slot_weights(gate: torch.Tensor, position_bias: torch.Tensor, step: int, overlap: bool):
    """Softmax weight of every window slot and channel, as transformers pools.

    gate: ``gate_proj`` output [B, T, C]; position_bias [s, C]. Returns (weights [B, N, w, D]
    float32, full [N] bool): N = T // s entries (trailing tokens of an unfinished block are not
    pooled), w = 2s with overlap (CSA) else s; ``full`` marks entries whose whole window lies at
    positions >= 0 (CSA entry 0 is partial: its Ca half has weight 0).
    """
    b, t, c = gate.shape
    n = t // step
    logits = gate[:, : n * step].float().view(b, n, step, c) + position_bias.float()
    full = torch.ones(n, dtype=torch.bool, device=gate.device)
    if overlap:
        d = c // 2
        window = logits.new_full((b, n, 2 * step, d), float("-inf"))
        window[:, :, step:] = logits[..., d:]  # Cb: this block's tokens
        window[:, 1:, :step] = logits[:, :-1, :, :d]  # Ca: the previous block's tokens
        logits = window
        full[:1] = False
    return logits.softmax(dim=2), full


def learned(position_bias: torch.Tensor, overlap: bool) -> dict:
    """{"learned": bias mean over channels [1][w], "learned_weight": bias-only softmax weight [1][w]}."""
    bias = slot_bias(position_bias, overlap)  # [w, D]
    return {
        "learned": [bias.mean(dim=1).tolist()],
        "learned_weight": [bias.softmax(dim=0).mean(dim=1).tolist()],
    }


def slot_source(step: int, overlap: bool) -> list[str]:
    """What each slot reads, for the JSON."""
    if not overlap:
        return [f"block offset {k} (position_bias[{k}])" for k in range(step)]
    return [f"Ca: previous block offset {k} (position_bias[{k}, :D])" for k in range(step)] + [
        f"Cb: current block offset {k} (position_bias[{k}, D:])" for k in range(step)
    ]


class V4SlotRecorder:
    """Per compressed layer, the mean slot weight of each input row, one [B,1,w] array (float64)
    per batch (1: the model's one KV head); ``indexer_rows`` the same for CSA layers' indexers."""

    def __init__(self) -> None:
        self.rows: dict[int, list[np.ndarray]] = {}
        self.indexer_rows: dict[int, list[np.ndarray]] = {}

    @staticmethod
    def _add(store: dict, layer: int, module, hidden: torch.Tensor, overlap: bool) -> None:
        # gate_proj(hidden) [B,T,C] -> weights [B,N,w,D], full [N]
        weights, full = slot_weights(module.gate_proj(hidden), module.position_bias, module.compress_rate, overlap)
        if not bool(full.any()):
            return
        per_row = weights[:, full].mean(dim=-1).mean(dim=1)  # channels, then windows -> [B, w]
        store.setdefault(layer, []).append(per_row[:, None].double().cpu().numpy())

    def hook(self, layer: int, overlap: bool):
        def record(module, args, kwargs, output):
            hidden = args[0] if args else kwargs["hidden_states"]
            cache = args[3] if len(args) > 3 else kwargs.get("cache", kwargs.get("past_key_values"))
            if cache is not None:
                raise ValueError(
                    "preferences: run the model with use_cache=False (a cache moves the compressor's windows "
                    "across calls, which the recorder does not follow)"
                )
            with torch.no_grad():
                self._add(self.rows, layer, module, hidden, overlap)
                if overlap:
                    self._add(self.indexer_rows, layer, module.indexer, hidden, True)

        return record


@contextlib.contextmanager
def record_v4_slot_weights(model) -> Iterator[V4SlotRecorder]:
    """Hooks every compressor of a DeepseekV4 model; always removed on exit."""
    recorder = V4SlotRecorder()
    handles = []
    try:
        for i, comp, overlap in compressors(model):
            handles.append(comp.register_forward_hook(recorder.hook(i, overlap), with_kwargs=True))
        yield recorder
    finally:
        for handle in handles:
            handle.remove()


def effective_preferences_v4(
    model, input_ids: torch.Tensor, batch_size: int = 16, seed: int = 0, n_resamples: int = 1000
) -> tuple[dict[int, dict], dict[int, dict]]:
    """(compressors, indexers): per layer {"mean","std","ci_low","ci_high": [1][w], "n_rows"}."""
    hf = hf_model_of(model)
    device = next(hf.parameters()).device
    with torch.no_grad(), record_v4_slot_weights(hf) as rec:
        for b0 in range(0, input_ids.shape[0], batch_size):
            hf(input_ids=input_ids[b0 : b0 + batch_size].to(device), use_cache=False, logits_to_keep=1)
    rng = np.random.default_rng(seed)
    main = {layer: summarise_rows(chunks, rng, n_resamples) for layer, chunks in sorted(rec.rows.items())}
    index = {layer: summarise_rows(chunks, rng, n_resamples) for layer, chunks in sorted(rec.indexer_rows.items())}
    return main, index


def model_preferences_v4(model, input_ids: torch.Tensor, seed: int = 0) -> dict:
    """preferences.json content for a DeepseekV4 model (the schema of ``preferences.model_preferences``)."""
    effective, indexer_effective = effective_preferences_v4(model, input_ids, seed=seed)
    layers = []
    for i, comp, overlap in compressors(model):
        step = comp.compress_rate
        window = 2 * step if overlap else step
        entry = {
            "layer": i,
            "pooler": "deepseek_v4_csa" if overlap else "deepseek_v4_hca",
            "step": step,
            "window": window,
            "align": 0,
            "slot_phase": [slot_phase(k, step, window) for k in range(window)],
            "slot_source": slot_source(step, overlap),
            **learned(comp.position_bias, overlap),
            "effective": effective.get(i),
        }
        if overlap:
            entry["indexer"] = {
                **learned(comp.indexer.position_bias, True),
                "effective": indexer_effective.get(i),
                "index_topk": int(comp.indexer.index_topk),
            }
        layers.append(entry)
    return {
        "n_rows": int(input_ids.shape[0]),
        "seq_len": int(input_ids.shape[1]),
        "seed": seed,
        "model": type(hf_model_of(model)).__name__,
        "note": "transformers DeepseekV4: slot 0 = oldest token of a window (CSA: slots 0..s-1 the previous "
        "block's Ca series, s..2s-1 the current block's Cb series); phase of slot k = k mod s; learned = "
        "position_bias mean over channels, learned_weight = softmax of position_bias alone; effective weights "
        "over full windows only (CSA entry 0 left out), mean over channels and windows, then mean over rows "
        "with std and bootstrap 95% interval over rows",
        "layers": layers,
    }
