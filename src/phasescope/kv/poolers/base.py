"""Pooler base class: how the w tokens of one window become one compressed KV entry.

Shape legend
    B batch, T tokens, C model width, Hk KV heads, D head dim,
    N entries, w window slots (slot 0 = oldest token), F per-token pooling features.

A pooler works in two steps so the decode cache can keep a small per-token state:
``features`` maps each token to what pooling needs (computed once per token), and ``pool``
turns the features of a window's slots into an entry. Slots before position 0 are invalid
(``valid`` False) and must get zero weight.
"""

from __future__ import annotations

from typing import ClassVar, Protocol

import torch
from torch import nn


class WindowGeometry(Protocol):
    """What a pooler reads of its layer's ``CompressionConfig`` (kv/config.py checks a config
    against the registry of poolers, so the poolers must not import the config back)."""

    step: int
    window: int


class Pooler(nn.Module):
    name: ClassVar[str]
    summary: ClassVar[str]
    # True when one pooled vector serves as both key and value (DeepSeek-V4's shared KV).
    shared_kv: ClassVar[bool] = False

    def __init__(self, cfg: WindowGeometry, d_model: int, n_kv_heads: int, head_dim: int):
        super().__init__()
        self.step, self.window = cfg.step, cfg.window
        self.n_kv_heads, self.head_dim = n_kv_heads, head_dim

    @classmethod
    def check_geometry(cls, cfg: WindowGeometry) -> None:
        """Raise ValueError when this pooler cannot serve the geometry."""

    def feature_dim(self) -> int:
        """F: per-token pooling features kept in the decode cache."""
        return 2 * self.head_dim

    def features(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """x [B,T,C], k/v [B,Hk,T,D] (pre-RoPE) -> [B,Hk,T,F]. Default: keys and values."""
        return torch.cat([k, v], dim=-1)

    def pool(self, feats: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """feats [B,Hk,N,w,F], valid [Hk,N,w] -> (k, v) each [B,Hk,N,D]."""
        raise NotImplementedError

    def reference_entry(self, feats: torch.Tensor, slots: list[int], head: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Slow, loop-level definition of one entry for the tests.

        feats [B,n,F]: features of the n present slots, oldest first; ``slots`` their slot
        indices in the window; ``head`` the KV head. Returns (k, v) each [B,D].
        """
        raise NotImplementedError

    def split_kv(self, feats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return feats[..., : self.head_dim], feats[..., self.head_dim : 2 * self.head_dim]


def masked_softmax(logits: torch.Tensor, valid: torch.Tensor, dim: int) -> torch.Tensor:
    """Softmax over ``dim`` giving invalid positions exactly zero weight."""
    return logits.masked_fill(~valid, float("-inf")).softmax(dim=dim)
