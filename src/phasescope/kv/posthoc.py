"""Post-hoc chunked compression of any transformers model: what would this model do if its KV
cache were chunk-compressed, with no retraining?

Inside ``compressed_attention(model, scheme)`` every attention layer of the model runs through
phasescope's compressed attention: the raw keys and values of the last L tokens, plus one
entry per window of ``step`` tokens — the mean of the window's keys and of its values (the
only pooler that needs no training) — in one joint softmax (``kv.attention.joint_attention``).
It is a transformers ``AttentionInterface`` function with a matching mask function, selected
by the model's attention implementation, and the context manager restores the model's own
implementation on exit, even after an exception.

Limits: the keys the model hands over are already rotated at their own positions, so an
entry averages differently rotated keys (the scheme's ``rope`` setting does not apply); the
model never learned to read such entries; whole sequences only (no generation with a cache).

Shape legend: B batch, H query heads, Hk KV heads, T tokens, D head dim.
"""

from __future__ import annotations

from contextlib import contextmanager

from phasescope.errors import InputError
from phasescope.kv.attention import KVView, joint_attention
from phasescope.kv.compressor import new_entries
from phasescope.kv.config import CompressionConfig
from phasescope.kv.poolers.mean import MeanPooler
from phasescope.specs import compress_fields

IMPLEMENTATION = "phasescope_compressed"


def parse_compress(text: str) -> CompressionConfig | None:
    """``none`` or ``mean:s=4,w=4,L=128`` (keys s, w, L, a, visibility) -> a scheme (None: none)."""
    fields = compress_fields(text)
    if fields is None:
        return None
    try:
        return CompressionConfig(kind="chunked", pooler="mean", rope="none", **fields)
    except InputError as err:
        raise InputError(f"--compress {text!r}: {err}") from None


def _attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """query [B,H,T,D], key/value [B,Hk,T,D] (rotated by the model) -> ([B,T,H,D], None)."""
    scheme: CompressionConfig = module._phasescope_scheme
    if key.shape[2] != query.shape[2]:
        raise InputError("post-hoc compression scores whole sequences; generation with a KV cache is not supported")
    d = query.shape[-1]
    pooler = MeanPooler(scheme, 0, key.shape[1], d).to(key.device)
    ends, comp_k, comp_v = new_entries(pooler, scheme, pooler.features(None, key, value), 0, 0)
    kv = KVView(raw_k=key, raw_v=value, raw_start=0, comp_k=comp_k, comp_v=comp_v, comp_end=ends.to(key.device))
    scale = d**-0.5 if scaling is None else scaling
    out = joint_attention(
        query * (scale / d**-0.5), 0, kv, local=scheme.local, strict=scheme.visibility == "strict"
    )  # joint_attention scales by d**-0.5
    return out.transpose(1, 2).contiguous(), None


def _register() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(IMPLEMENTATION, _attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(IMPLEMENTATION, sdpa_mask)  # the causal mask; visibility is ours


@contextmanager
def compressed_attention(model, scheme: CompressionConfig | None):
    """Run ``model`` with post-hoc compressed attention (``scheme=None``: the model unchanged)."""
    if scheme is None:
        yield model
        return
    _register()
    previous = model.config._attn_implementation
    layers = [m for m in model.modules() if hasattr(m, "layer_idx") and hasattr(m, "num_key_value_groups")]
    if not layers:
        raise InputError(f"{type(model).__name__}: no attention layers that use transformers' AttentionInterface")
    for layer in layers:
        layer._phasescope_scheme = scheme
    try:
        model.set_attn_implementation(IMPLEMENTATION)
        yield model
    finally:
        model.set_attn_implementation(previous)
        for layer in layers:
            del layer._phasescope_scheme
