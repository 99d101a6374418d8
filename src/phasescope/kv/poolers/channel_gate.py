"""``channel_gate``: DeepSeek-V4's compressor.

Shape legend: as in base.py (B, T, C, Hk, D, N, w, F), plus m = w / s series per token
(s = step); F = 2·m·D: the m kv series, then the m gate series, D channels each.

Each token makes ``m = w / s`` candidate vectors ``W_kv·x`` and gate logits ``W_gate·x`` (one
series per step block of the window). For window slot o (block ``o // s``, oldest first) the
entry takes, per channel, a softmax over the window of ``gate + position_bias[o]`` and
weights the matching kv series; the sum is RMS-normalised (learned scale). As in V4 the
entry serves as key and value. ``position_bias=False`` gives V4.1's compressor.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from phasescope.errors import InputError
from phasescope.kv.poolers.base import Pooler, masked_softmax


def upcast(x: torch.Tensor) -> torch.Tensor:
    """At least float32 (half-precision softmax/norm statistics collapse small differences)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    x32 = upcast(x)
    return (weight * x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


class ChannelGatePooler(Pooler):
    name = "channel_gate"
    summary = "DeepSeek-V4 compressor: per-channel softmax of W_gate·x + position bias over W_kv·x, RMSNorm"
    shared_kv = True
    eps = 1e-6

    def __init__(self, cfg, d_model, n_kv_heads, head_dim, position_bias: bool = True):
        super().__init__(cfg, d_model, n_kv_heads, head_dim)
        self.n_series = cfg.window // cfg.step
        width = self.n_series * n_kv_heads * head_dim
        self.wkv = nn.Linear(d_model, width, bias=False)
        self.wgate = nn.Linear(d_model, width, bias=False)
        self.position_bias = nn.Parameter(torch.zeros(cfg.window, n_kv_heads, head_dim)) if position_bias else None
        self.norm_weight = nn.Parameter(torch.ones(head_dim))
        # slot o reads series o // s
        self.register_buffer("slot_series", torch.arange(cfg.window) // cfg.step, persistent=False)

    @classmethod
    def check_geometry(cls, cfg):
        if cfg.window % cfg.step:
            raise InputError(
                f"compression config: window={cfg.window} is invalid for pooler channel_gate; "
                f"allowed: a multiple of step ({cfg.step}), e.g. window={cfg.step} or {2 * cfg.step}"
            )

    def _per_head(self, y: torch.Tensor) -> torch.Tensor:
        # [B,T,m*Hk*D] -> [B,Hk,T,m*D] (series-major within a head)
        b, t, _ = y.shape
        y = y.view(b, t, self.n_series, self.n_kv_heads, self.head_dim).permute(0, 3, 1, 2, 4)
        return y.reshape(b, self.n_kv_heads, t, self.n_series * self.head_dim)

    def feature_dim(self) -> int:
        return 2 * self.n_series * self.head_dim

    def features(self, x, k, v):
        # x [B,T,C] -> [B,Hk,T,F]: W_kv·x series, then W_gate·x series (k, v unused)
        return torch.cat([self._per_head(self.wkv(x)), self._per_head(self.wgate(x))], dim=-1)

    def _slot_bias(self, slot: int, head: int) -> torch.Tensor | float:
        return 0.0 if self.position_bias is None else self.position_bias[slot, head]

    def pool(self, feats, valid):
        b, hk, n, w, _ = feats.shape
        m, d = self.n_series, self.head_dim
        feats = feats.view(b, hk, n, w, 2, m, d)
        pick = F.one_hot(self.slot_series, m).to(feats.dtype)  # [w, m]
        kv, gate = torch.einsum("bhnwcmd,wm->bhnwcd", feats, pick).unbind(dim=4)  # each [B,Hk,N,w,D]
        if self.position_bias is not None:
            gate = gate + self.position_bias.permute(1, 0, 2)[:, None]  # [Hk,1,w,D]
        weights = masked_softmax(upcast(gate), valid[None, :, :, :, None], dim=3).to(kv.dtype)
        entry = rms_norm((weights * kv).sum(dim=3), self.norm_weight, self.eps)  # [B,Hk,N,D]
        return entry, entry

    def reference_entry(self, feats, slots, head):
        d, m = self.head_dim, self.n_series
        kvs, gates = [], []
        for i, slot in enumerate(slots):
            series = slot // self.step
            kvs.append(feats[:, i, series * d : (series + 1) * d])
            gate_start = m * d + series * d
            gates.append(feats[:, i, gate_start : gate_start + d] + self._slot_bias(slot, head))
        weights = torch.softmax(torch.stack(gates, dim=1), dim=1)
        entry = rms_norm((weights * torch.stack(kvs, dim=1)).sum(dim=1), self.norm_weight, self.eps)
        return entry, entry


class ChannelGateNoBiasPooler(ChannelGatePooler):
    name = "channel_gate_nobias"
    summary = "DeepSeek-V4.1 compressor: channel_gate without the per-offset position bias"

    def __init__(self, cfg, d_model, n_kv_heads, head_dim):
        super().__init__(cfg, d_model, n_kv_heads, head_dim, position_bias=False)
