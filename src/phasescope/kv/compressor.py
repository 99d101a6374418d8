"""Builds compressed entries for newly completed windows (parallel forward and decode alike).

Shape legend
    B batch, Hk KV heads, S buffered tokens, F pooling features, N entries, w window, D head dim.

The caller hands over a feature buffer covering the new tokens plus the last ``w-1`` tokens
before them (the decode cache keeps exactly those), so every window that completes among
the new tokens can be gathered from it.
"""

from __future__ import annotations

import torch

from phasescope.kv.config import PAD_END, CompressionConfig, head_entry_ends
from phasescope.kv.poolers import Pooler


def gather_windows(
    feats: torch.Tensor, buf_start: int, ends: torch.Tensor, window: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """feats [B,Hk,S,F] for positions buf_start.., ends [Hk,N] -> windows [B,Hk,N,w,F], valid [Hk,N,w]."""
    b, hk, s, f = feats.shape
    n = ends.shape[1]
    if _windows_tile(ends, buf_start, s, window):  # a view: no copy of the features (prefill's largest)
        windows = feats.narrow(2, int(ends[0, 0]) - window + 1 - buf_start, n * window).unflatten(2, (n, window))
        return windows, torch.ones(hk, n, window, dtype=torch.bool, device=ends.device)
    slot_pos = ends[:, :, None] - window + 1 + torch.arange(window, device=ends.device)  # [Hk,N,w]
    valid = slot_pos >= 0
    if (valid & (slot_pos < buf_start)).any():
        raise RuntimeError("compressor buffer misses tokens of a window; the cache lost pooling state")
    idx = (slot_pos - buf_start).clamp(0, s - 1).reshape(1, hk, n * window, 1).expand(b, hk, n * window, f)
    windows = torch.gather(feats, 2, idx).view(b, hk, n, window, f)
    return windows, valid


def _windows_tile(ends: torch.Tensor, buf_start: int, buf_len: int, window: int) -> bool:
    """Every head's windows the same, back to back (spaced by w), inside the buffer and after
    position 0: then they are consecutive slices of the buffer."""
    first_start = int(ends[0, 0]) - window + 1
    inside = first_start >= max(buf_start, 0) and first_start + ends.shape[1] * window <= buf_start + buf_len
    spaced = ends[0, 0] + window * torch.arange(ends.shape[1], device=ends.device)
    return inside and bool((ends == spaced).all())


def new_entries(
    pooler: Pooler, cfg: CompressionConfig, feats: torch.Tensor, buf_start: int, new_start: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Entries completing at positions new_start .. buf_end-1: (ends [Hk,N], k, v [B,Hk,N,D]), pre-RoPE."""
    n_kv_heads, buf_end = feats.shape[1], buf_start + feats.shape[2]
    ends = head_entry_ends(cfg, new_start, buf_end, n_kv_heads).to(feats.device)
    if ends.shape[1] == 0:  # most decode steps complete no window
        empty = feats.new_zeros(feats.shape[0], n_kv_heads, 0, pooler.head_dim)
        return ends, empty, empty
    windows, valid = gather_windows(feats, buf_start, ends, cfg.window)
    valid |= (ends == PAD_END)[:, :, None]  # padding entries: any finite value, never visible
    k, v = pooler.pool(windows, valid)
    return ends, k, v


def compact_entries(
    comp_k: torch.Tensor, comp_v: torch.Tensor, comp_end: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Entries (k, v [B,Hk,N,D], ends [Hk,N]) with each head's sorted by end, padding last,
    and all-padding columns dropped.

    Staggered heads complete windows at different steps, so appending per call leaves
    padding between real entries; compacting keeps the cache at one slot per entry.
    """
    order = comp_end.argsort(dim=1, stable=True)  # [Hk,N]
    ends = comp_end.gather(1, order)
    keep = int((ends != PAD_END).sum(dim=1).max())
    order, ends = order[:, :keep], ends[:, :keep]
    idx = order[None, :, :, None].expand(comp_k.shape[0], -1, -1, comp_k.shape[-1])
    return comp_k.gather(2, idx), comp_v.gather(2, idx), ends
