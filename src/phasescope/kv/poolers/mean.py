"""``mean``: plain average of the window's keys and of its values (no parameters).

Shape legend: as in base.py (B, Hk, N, w, F).
"""

from __future__ import annotations

import torch

from phasescope.kv.poolers.base import Pooler


class MeanPooler(Pooler):
    name = "mean"
    summary = "average of the window's keys and values; no parameters"

    def pool(self, feats, valid):
        if bool(valid.all()):  # whole windows (all but those reaching before position 0)
            return self.split_kv(feats.mean(dim=3))  # a reduction in place: no permuted copy
        weights = valid.to(feats.dtype)
        weights = weights / weights.sum(-1, keepdim=True)  # [Hk,N,w]
        pooled = torch.einsum("hnw,bhnwf->bhnf", weights, feats)  # [B,Hk,N,F]
        return self.split_kv(pooled)

    def reference_entry(self, feats, slots, head):
        return self.split_kv(feats.mean(dim=1))
