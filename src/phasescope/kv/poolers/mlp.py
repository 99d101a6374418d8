"""``mlp``: NSA's compressor. A learned intra-window position embedding is added to each
slot's key (value), the window is flattened and an MLP maps it to one key (value).
Empty slots (before position 0) are zero vectors without position embedding.

Shape legend: as in base.py (B, Hk, N, w, D, F = 2·D: key, then value).
"""

from __future__ import annotations

import torch
from torch import nn

from phasescope.kv.poolers.base import Pooler


def _window_mlp(window: int, head_dim: int) -> nn.Sequential:
    hidden = 2 * head_dim
    return nn.Sequential(nn.Linear(window * head_dim, hidden), nn.GELU(), nn.Linear(hidden, head_dim))


class MLPPooler(Pooler):
    name = "mlp"
    summary = "NSA compressor: MLP over the flattened window plus a learned intra-window position embedding"

    def __init__(self, cfg, d_model, n_kv_heads, head_dim):
        super().__init__(cfg, d_model, n_kv_heads, head_dim)
        self.pos_k = nn.Parameter(torch.randn(cfg.window, head_dim) * 0.02)  # [w,D], as pos_v
        self.pos_v = nn.Parameter(torch.randn(cfg.window, head_dim) * 0.02)
        self.mlp_k = _window_mlp(cfg.window, head_dim)
        self.mlp_v = _window_mlp(cfg.window, head_dim)

    def pool(self, feats, valid):
        k, v = self.split_kv(feats)  # [B,Hk,N,w,D]
        keep = valid[None, :, :, :, None].to(feats.dtype)
        k = ((k + self.pos_k) * keep).flatten(-2)  # [B,Hk,N,w*D]
        v = ((v + self.pos_v) * keep).flatten(-2)
        return self.mlp_k(k), self.mlp_v(v)

    def reference_entry(self, feats, slots, head):
        batch, d = feats.shape[0], self.head_dim
        k_flat = feats.new_zeros(batch, self.window * d)
        v_flat = feats.new_zeros(batch, self.window * d)
        for i, slot in enumerate(slots):
            k_flat[:, slot * d : (slot + 1) * d] = feats[:, i, :d] + self.pos_k[slot]
            v_flat[:, slot * d : (slot + 1) * d] = feats[:, i, d : 2 * d] + self.pos_v[slot]
        return self.mlp_k(k_flat), self.mlp_v(v_flat)
