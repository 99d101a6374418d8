"""KV-cache size: the analytic formula and a measurement on a real cache."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from phasescope.kv.config import CompressionConfig, entry_range
from phasescope.kv.poolers import POOLERS
from phasescope.model.config import ModelConfig


def layer_cache_bytes(scheme: CompressionConfig, cfg: ModelConfig, n_tokens: int, itemsize: int) -> int:
    """Bytes one layer's cache holds after n_tokens.

    full: all raw K and V. sliding: the last L raw K and V. chunked: the last L raw K and V,
    one K and V per completed entry (the most of any KV head; once for a shared K=V entry whose
    value is its key: rotated together with ``value_rope``, or not rotated at all), and the
    pooling features of the last w-1 tokens.
    """
    per_token_kv = 2 * cfg.n_kv_heads * cfg.head_dim * itemsize
    if scheme.kind == "full":
        return n_tokens * per_token_kv
    raw = min(n_tokens, scheme.local) * per_token_kv
    if scheme.kind == "sliding":
        return raw
    n_entries = max(
        len(entry_range(0, n_tokens, scheme.step, scheme.head_align(h, cfg.n_kv_heads))) for h in range(cfg.n_kv_heads)
    )
    pooler = POOLERS[scheme.pooler](scheme, cfg.d_model, cfg.n_kv_heads, cfg.head_dim)
    pending = min(n_tokens, scheme.window - 1) * cfg.n_kv_heads * pooler.feature_dim() * itemsize
    # a shared key/value entry is stored once unless only its key is rotated
    stored_once = pooler.shared_kv and (scheme.value_rope or scheme.rope == "none" or not cfg.rope)
    per_entry = per_token_kv // 2 if stored_once else per_token_kv
    return raw + n_entries * per_entry + pending


def cache_bytes(cfg: ModelConfig, n_tokens: int, itemsize: int = 4) -> int:
    return sum(layer_cache_bytes(layer, cfg, n_tokens, itemsize) for layer in cfg.layers)


@dataclass
class Savings:
    n_tokens: int
    compressed_bytes: int
    full_bytes: int

    @property
    def ratio(self) -> float:
        return self.compressed_bytes / self.full_bytes

    def __str__(self) -> str:
        return (
            f"KV cache after {self.n_tokens} tokens: {self.compressed_bytes / 2**20:.2f} MiB vs "
            f"{self.full_bytes / 2**20:.2f} MiB with full attention ({self.ratio:.1%}, {self._relation()})"
        )

    def _relation(self) -> str:
        """Short contexts: the compressed cache's fixed parts (window state, raw window) can make it larger."""
        if self.ratio > 1:
            return f"{self.ratio:.1f}x larger: at this length the window state and raw window outweigh the savings"
        return "the same size" if self.ratio == 1 else f"{1 / self.ratio:.1f}x smaller"


def savings(cfg: ModelConfig, n_tokens: int, itemsize: int = 4) -> Savings:
    """Analytic cache size of ``cfg`` vs the same model with full attention everywhere."""
    full = cfg.with_layers(CompressionConfig(kind="full"))
    return Savings(n_tokens, cache_bytes(cfg, n_tokens, itemsize), cache_bytes(full, n_tokens, itemsize))


def measured_cache_bytes(model, input_ids: torch.Tensor) -> int:
    """Prefill ``input_ids`` into a fresh cache and return the bytes it holds."""
    cache = model.new_cache()
    with torch.no_grad():
        model(input_ids, 0, cache)
    return cache.nbytes()
