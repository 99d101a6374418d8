"""``scalar_gate``: one learned logit per window offset (per KV head), softmax over the
window's present slots, weighting keys and values. The study's reference design.

Shape legend: as in base.py (B, Hk, N, w, F).
"""

from __future__ import annotations

import torch
from torch import nn

from phasescope.kv.poolers.base import Pooler, masked_softmax


class ScalarGatePooler(Pooler):
    name = "scalar_gate"
    summary = "softmax over one learned logit per window offset (study's reference design)"

    def __init__(self, cfg, d_model, n_kv_heads, head_dim):
        super().__init__(cfg, d_model, n_kv_heads, head_dim)
        # Zero init = mean pooling at the start of training.
        self.offset_logits = nn.Parameter(torch.zeros(n_kv_heads, cfg.window))  # [Hk,w]

    def pool(self, feats, valid):
        logits = self.offset_logits[:, None, :].expand_as(valid)
        weights = masked_softmax(logits, valid, dim=-1).to(feats.dtype)  # [Hk,N,w]
        pooled = torch.einsum("hnw,bhnwf->bhnf", weights, feats)  # [B,Hk,N,F]
        return self.split_kv(pooled)

    def reference_entry(self, feats, slots, head):
        weights = torch.softmax(self.offset_logits[head, slots], dim=0)
        pooled = (weights[None, :, None] * feats).sum(dim=1)
        return self.split_kv(pooled)
