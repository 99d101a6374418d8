"""One joint softmax over visible raw keys and visible compressed entries.

Shape legend
    B batch, H query heads, Hk KV heads, G = H / Hk query heads per KV head,
    T queries, S raw keys, N compressed entries, D head dim.

Queries and raw keys cover contiguous positions: query i sits at ``q_start + i``, raw key j
at ``raw_start + j``. Entry n of KV head h completes at ``comp_end[h, n]``.

Queries are processed in blocks so that each block reads only the raw keys inside its local
window and the entries completed before its last query: the work grows like T·(L + T/s)
instead of T².
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

# (q_block [B,Hk,G,Tb,D], comp_k [B,Hk,Nb,D], visible [Hk,Tb,Nb]) -> restricted visible mask.
# The hook for a top-k indexer (DeepSeek-V4 CSA keeps 512 entries per query).
EntrySelector = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass
class KVView:
    """What one attention call may read: raw keys/values and compressed entries."""

    raw_k: torch.Tensor  # [B,Hk,S,D]
    raw_v: torch.Tensor  # [B,Hk,S,D]
    raw_start: int
    comp_k: torch.Tensor | None = None  # [B,Hk,N,D]
    comp_v: torch.Tensor | None = None  # [B,Hk,N,D]
    comp_end: torch.Tensor | None = None  # [Hk,N] long


def joint_attention(
    q: torch.Tensor,
    q_start: int,
    kv: KVView,
    *,
    local: int | None,
    strict: bool = False,
    sink: torch.Tensor | None = None,
    select: EntrySelector | None = None,
    block: int = 128,
) -> torch.Tensor:
    """q [B,H,T,D] -> output [B,H,T,D].

    local=None: every earlier raw key is visible (full attention); otherwise the last
    ``local`` raw positions (0 = none). strict: entry visible iff query pos > its end
    (else >=). sink [H]: per-head logit that joins the softmax with a zero value.
    """
    b, h, t, d = q.shape
    hk = kv.raw_k.shape[1]
    qg = q.view(b, hk, h // hk, t, d) * d**-0.5
    sink_g = None if sink is None else sink.view(1, hk, h // hk, 1, 1).to(q.dtype)
    outs = []
    for t0 in range(0, t, block):
        t1 = min(t, t0 + block)
        keys, values, mask = _block_keys(
            kv, q_start + t0, q_start + t1, local, strict, qg[:, :, :, t0:t1], select
        )
        logits = qg[:, :, :, t0:t1] @ keys.transpose(-1, -2).unsqueeze(2)  # [B,Hk,G,Tb,K]
        outs.append(_softmax_apply(logits, mask, values, sink_g))
    return torch.cat(outs, dim=3).view(b, h, t, d)


def _block_keys(kv: KVView, pos0: int, pos1: int, local, strict, q_block, select):
    """Keys, values [B,Hk,K,D] and visibility mask [1,Hk,1,Tb,K] for queries pos0..pos1-1."""
    q_pos = torch.arange(pos0, pos1, device=kv.raw_k.device)
    n_raw = kv.raw_k.shape[2]
    lo = 0 if local is None else max(pos0 - local + 1 - kv.raw_start, 0)
    hi = min(pos1 - kv.raw_start, n_raw)
    if local == 0:
        lo = hi
    k_pos = torch.arange(kv.raw_start + lo, kv.raw_start + hi, device=q_pos.device)
    raw_mask = k_pos[None, :] <= q_pos[:, None]
    if local is not None:
        raw_mask &= k_pos[None, :] > q_pos[:, None] - local
    hk = kv.raw_k.shape[1]
    keys, values = [kv.raw_k[:, :, lo:hi]], [kv.raw_v[:, :, lo:hi]]
    masks = [raw_mask.expand(hk, -1, -1)]
    if kv.comp_end is not None and kv.comp_end.shape[1]:
        last = pos1 - 1
        ready = (kv.comp_end < last) if strict else (kv.comp_end <= last)
        n_b = int(ready.sum(dim=1).max())
        ends = kv.comp_end[:, None, :n_b]
        comp_mask = (ends < q_pos[None, :, None]) if strict else (ends <= q_pos[None, :, None])
        comp_k = kv.comp_k[:, :, :n_b]
        if select is not None and n_b:
            comp_mask = select(q_block, comp_k, comp_mask)
        keys.append(comp_k)
        values.append(kv.comp_v[:, :, :n_b])
        masks.append(comp_mask)
    mask = torch.cat(masks, dim=-1)[None, :, None]
    return torch.cat(keys, dim=2), torch.cat(values, dim=2), mask


def _softmax_apply(logits, mask, values, sink):
    """Masked softmax (plus optional sink column with zero value) applied to values.

    A query that sees nothing and has no sink gets a zero output instead of NaN.
    """
    if logits.shape[-1] == 0:  # nothing visible at all: the sink (zero value) or nothing
        return logits.new_zeros(*logits.shape[:-1], values.shape[-1])
    logits = logits.masked_fill(~mask, float("-inf"))
    top = logits.amax(dim=-1, keepdim=True)
    if sink is not None:
        top = torch.maximum(top, sink.expand_as(top))
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top)).detach()
    weights = torch.exp(logits - top)
    denom = weights.sum(dim=-1, keepdim=True)
    if sink is not None:
        denom = denom + torch.exp(sink - top)
    out = weights @ values.unsqueeze(2)
    return out / denom.clamp_min(torch.finfo(out.dtype).tiny)
