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
import torch.nn.functional as F

# (q_block [B,H,Tb,D], comp_k [B,Hk,Nb,D], visible [Hk,Tb,Nb]) -> entries to keep [Hk,Tb,Nb].
# The hook for a top-k indexer (DeepSeek-V4 CSA keeps 512 entries per query). Its result is
# AND-ed with ``visible``: a selector can hide entries, never reveal a future or padding one.
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
    # True when the caller knows every KV head's entries end alike (no stagger): the attention
    # then need not compare comp_end's rows (O(N) per decode step)
    ends_alike: bool = False


def joint_attention(
    q: torch.Tensor,
    q_start: int,
    kv: KVView,
    *,
    local: int | None,
    strict: bool = False,
    sink: torch.Tensor | None = None,
    select: EntrySelector | None = None,
    block: int = 256,
    bulk_rows: int = 1024,
) -> torch.Tensor:
    """q [B,H,T,D] -> output [B,H,T,D].

    local=None: every earlier raw key is visible (full attention); otherwise the last
    ``local`` raw positions (0 = none). strict: entry visible iff query pos > its end
    (else >=). sink [H]: per-head logit that joins the softmax with a zero value.
    bulk_rows: on the inference fast path, query rows (queries x heads per KV head) that
    share one unmasked call over the entries they all see (see ``_split_attention``).
    """
    t = q.shape[2]
    if t == 1 and _is_prefix_decode(kv, local, select):
        return _decode_attention(q, q_start, kv, local, strict, sink)
    if t > SMALL_BLOCK and _can_split(q, kv, local, select):
        return _split_attention(q, kv, q_start, local, strict, sink, block, bulk_rows)
    # Each query sees its own raw token unless local == 0; only then can a row be empty.
    may_see_nothing = local == 0 and sink is None
    # Heads see different entries only when their entry ends differ (stagger) or a selector acts.
    per_head_mask = select is not None or _entry_ends_differ(kv)
    outs = []
    for t0 in range(0, t, block):
        t1 = min(t, t0 + block)
        q_block = q[:, :, t0:t1]
        segments = _block_segments(kv, q_start + t0, q_start + t1, local, strict, q_block, select)
        if t1 - t0 <= SMALL_BLOCK or (may_see_nothing and _some_row_empty(segments)):
            outs.append(_segmented_attention(q_block, segments, sink))
        else:
            keys, values, mask = _concat(segments)
            outs.append(_fused_attention(q_block, keys, values, mask if per_head_mask else mask[:1], sink))
    return torch.cat(outs, dim=2)


def _entry_ends_differ(kv: KVView) -> bool:
    return (
        not kv.ends_alike
        and kv.comp_end is not None
        and kv.comp_end.shape[0] > 1
        and not bool((kv.comp_end == kv.comp_end[:1]).all())
    )


def _is_prefix_decode(kv: KVView, local, select) -> bool:
    """One query whose visible keys are two prefixes/bands with no mask: a raw band that includes
    its own token (local >= 1) and the entries every KV head completed alike, sorted by end."""
    sees_own_token = local is not None and local >= 1
    return select is None and sees_own_token and kv.comp_end is not None and not _entry_ends_differ(kv)


def _decode_attention(q, q_start: int, kv: KVView, local: int, strict: bool, sink) -> torch.Tensor:
    """A decode step (q [B,H,1,D]) with few operations: the entries it sees are the first ``n``
    (ends sorted, found by binary search), the raw keys it sees the last ``local`` up to its own;
    both are read in place (no mask, no copy) and share one softmax with the sink's logit. At
    short contexts a step is dominated by its count of small operations, at long ones by reading
    the entries once."""
    b, h, _, d = q.shape
    hk = kv.raw_k.shape[1]
    rows = q.reshape(b, hk, h // hk, d) * d**-0.5  # [B,Hk,G,D]
    n = int(_entries_seen([q_start], kv.comp_end[:1], strict))
    lo = max(q_start - local + 1 - kv.raw_start, 0)
    hi = min(q_start + 1 - kv.raw_start, kv.raw_k.shape[2])
    comp_k, comp_v = kv.comp_k[:, :, :n], kv.comp_v[:, :, :n]
    raw_k, raw_v = kv.raw_k[:, :, lo:hi], kv.raw_v[:, :, lo:hi]
    logits = [rows @ comp_k.transpose(-1, -2), rows @ raw_k.transpose(-1, -2)]  # [B,Hk,G,n], [B,Hk,G,S]
    if sink is not None:
        logits.append(sink.to(q.dtype).view(1, hk, h // hk, 1).expand(b, -1, -1, 1))
    weights = torch.softmax(torch.cat(logits, dim=-1), dim=-1)
    out = weights[..., :n] @ comp_v + weights[..., n : n + hi - lo] @ raw_v  # the sink adds no value
    return out.reshape(b, h, 1, d)


# Decode-sized blocks skip the concatenation of key segments that the fused kernel needs.
SMALL_BLOCK = 4

Segment = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # keys [B,Hk,K,D], values, mask [Hk,Tb,K]


def _concat(segments: list[Segment]) -> Segment:
    """One key/value/mask triple from several segments (along the key axis)."""
    keys, values, masks = zip(*segments, strict=True)
    return torch.cat(keys, dim=2), torch.cat(values, dim=2), torch.cat(masks, dim=-1)


def _some_row_empty(segments: list[Segment]) -> bool:
    seen = torch.stack([mask.any(dim=-1) for _, _, mask in segments]).any(dim=0)
    return not bool(seen.all())


def _block_segments(kv: KVView, pos0: int, pos1: int, local, strict, q_block, select) -> list[Segment]:
    """Raw and compressed key segments visible to queries pos0..pos1-1, with their masks."""
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
    segments = [(kv.raw_k[:, :, lo:hi], kv.raw_v[:, :, lo:hi], raw_mask.expand(hk, -1, -1))]
    if kv.comp_end is not None and kv.comp_end.shape[1]:
        last = pos1 - 1
        ready = (kv.comp_end < last) if strict else (kv.comp_end <= last)
        n_b = int(ready.sum(dim=1).max())
        ends = kv.comp_end[:, None, :n_b]
        comp_mask = (ends < q_pos[None, :, None]) if strict else (ends <= q_pos[None, :, None])
        comp_k = kv.comp_k[:, :, :n_b]
        if select is not None and n_b:
            comp_mask = comp_mask & select(q_block, comp_k, comp_mask)
        segments.append((comp_k, kv.comp_v[:, :, :n_b], comp_mask))
    return segments


# Inference fast path (``_split_attention``). Entries that every query of a block already
# sees need no mask; they are attended in place (no copy) and merged with the masked rest
# through log-sum-exps.
# torch's CPU flash kernel returns the log-sum-exp, but not differentiably, so training
# (and other devices) use the concatenated path above.
_FLASH_WITH_LSE = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def _can_split(q: torch.Tensor, kv: KVView, local, select) -> bool:
    needs_grad = torch.is_grad_enabled() and any(
        x is not None and x.requires_grad for x in (q, kv.raw_k, kv.raw_v, kv.comp_k, kv.comp_v)
    )
    return (
        _FLASH_WITH_LSE is not None
        and q.device.type == "cpu"
        and not needs_grad
        and select is None
        and local is not None
        and local >= 1  # every query then sees its own raw token, so no row is empty
        and kv.comp_end is not None
    )


def _flash_lse(q, keys, values, bias=None):
    """q [B,Hk,R,D], keys/values [B,Hk,K,D], bias [1,Hk or 1,R,K] (additive, -inf where hidden)
    -> (out [B,Hk,R,D], lse [B,Hk,R])."""
    return _FLASH_WITH_LSE(q, keys, values, attn_mask=bias, scale=q.shape[-1] ** -0.5)[:2]


def _split_attention(q, kv: KVView, q_start: int, local: int, strict: bool, sink, block: int, bulk_rows: int):
    """The inference fast path of ``joint_attention`` (same arguments; returns [B,H,T,D]).

    Queries go in bulk blocks of about ``bulk_rows`` rows (query heads sharing a KV head are
    folded into rows). Entries that every query of a bulk block sees are attended in one
    unmasked call: torch's CPU flash kernel only tiles its queries by 256 from 768 rows on,
    so small calls run at half its speed. The rest is attended per sub-block of ``block``
    queries in two calls that read the keys in place -- the raw band, and the entries
    completing inside the bulk block -- each with a visibility bias (0 where seen, -inf where
    hidden; the kernel takes no boolean mask), and the parts are merged exactly through their
    log-sum-exps (plus the sink's term), in place in the output. The output is written
    into one [B,T,H,D] buffer (returned as its [B,H,T,D] view), so the caller's transpose
    before the output projection copies nothing. A short prefill's time goes to the count of
    small operations as much as to the kernel, so a block's bounds are found for all blocks
    at once and the raw band's bias, the same for every full block, is built once.
    """
    b, h, t, d = q.shape
    hk = kv.raw_k.shape[1]
    g = h // hk
    out = q.new_empty(b, t, h, d).transpose(1, 2)
    bulk = _bulk_queries(block, bulk_rows, g)
    # without stagger every KV head sees the same keys: one bias row broadcast over the heads
    mask_heads = hk if _entry_ends_differ(kv) else 1
    sink_rows = None if sink is None else sink.to(torch.promote_types(q.dtype, torch.float32)).view(1, hk, g, 1)
    ends = kv.comp_end[:mask_heads]
    bulk_starts = list(range(0, t, bulk))
    block_starts = list(range(0, t, block))
    # entries seen by every head at a bulk block's first query; by some head at a block's last
    n_bulk = _entries_seen([q_start + b0 for b0 in bulk_starts], ends, strict).amin(dim=0).tolist()
    n_block = (
        _entries_seen([q_start + min(t, t0 + block) - 1 for t0 in block_starts], ends, strict).amax(dim=0).tolist()
    )
    band = _BandBias(local, q.dtype, q.device)
    for b0, n_seen in zip(bulk_starts, n_bulk, strict=True):
        b1 = min(t, b0 + bulk)
        bulk_lse = None
        if n_seen:  # written into the output at once; each sub-block then rescales it and adds its part
            rows = q[:, :, b0:b1].reshape(b, hk, g * (b1 - b0), d)
            o, lse = _flash_lse(rows, kv.comp_k[:, :, :n_seen], kv.comp_v[:, :, :n_seen])
            out[:, :, b0:b1].unflatten(1, (hk, g)).copy_(o.reshape(b, hk, g, b1 - b0, d))
            bulk_lse = lse.reshape(b, hk, g, b1 - b0)
            del o
        for t0 in range(b0, b1, block):
            t1 = min(b1, t0 + block)
            pos0, pos1 = q_start + t0, q_start + t1
            lo, hi = max(pos0 - local + 1 - kv.raw_start, 0), min(pos1 - kv.raw_start, kv.raw_k.shape[2])
            n_end = max(n_block[t0 // block], n_seen)
            rows = q[:, :, t0:t1].reshape(b, hk, g * (t1 - t0), d)
            band_bias = band(kv.raw_start + lo - pos0, hi - lo, t1 - t0)  # [1,Tb,K]
            # the raw band and the block's new entries in two calls, read in place (no key copy)
            parts = [_flash_part(rows, kv.raw_k[:, :, lo:hi], kv.raw_v[:, :, lo:hi], band_bias, g)]
            if n_end > n_seen:
                entry_bias = _visible_bias(ends[:, None, n_seen:n_end], strict, pos0, pos1, q.dtype)  # [mh,Tb,Ne]
                o, lse = _flash_part(rows, kv.comp_k[:, :, n_seen:n_end], kv.comp_v[:, :, n_seen:n_end], entry_bias, g)
                # a query that sees none of them (not even the earliest) gets lse 0 from the kernel:
                # -inf gives that part no weight
                sees_none = torch.isinf(entry_bias[:, :, 0])  # [mh,Tb]
                parts.append((o, lse.masked_fill(sees_none.view(1, -1, 1, t1 - t0), float("-inf"))))
            seen_lse = None if bulk_lse is None else bulk_lse[..., t0 - b0 : t1 - b0]
            _merge(out[:, :, t0:t1].unflatten(1, (hk, g)), parts, seen_lse, sink_rows)
    return out


def _flash_part(rows, keys, values, bias, group: int):
    """One softmax part: rows [B,Hk,G*Tb,D] (G query heads per KV head folded in), keys/values
    [B,Hk,K,D], bias [1 or Hk,Tb,K] -> (out [B,Hk,G,Tb,D], lse [B,Hk,G,Tb])."""
    b, hk, r, d = rows.shape
    tb = r // group
    if group > 1:
        bias = bias[:, None].expand(-1, group, -1, -1).reshape(bias.shape[0], r, -1)
    o, lse = _flash_lse(rows, keys, values, bias[None])
    return o.reshape(b, hk, group, tb, d), lse.reshape(b, hk, group, tb)


def _entries_seen(positions: list[int], ends: torch.Tensor, strict: bool) -> torch.Tensor:
    """Per head (row of ends [mh,N], ascending), how many entries a query at each of
    ``positions`` sees (an entry is seen from its end on, or after it when strict):
    [mh, len(positions)] counts."""
    last_end = [p - 1 if strict else p for p in positions]  # the last end a query there sees
    where = torch.tensor(last_end, device=ends.device).expand(ends.shape[0], -1).contiguous()
    return torch.searchsorted(ends.contiguous(), where, right=True)


def _visible_bias(ends: torch.Tensor, strict: bool, pos0: int, pos1: int, dtype) -> torch.Tensor:
    """The additive bias of queries pos0..pos1-1 over entries ending at ``ends``."""
    q_pos = torch.arange(pos0, pos1, device=ends.device)[:, None]
    return _additive_bias((ends < q_pos) if strict else (ends <= q_pos), dtype)


def _additive_bias(seen: torch.Tensor, dtype) -> torch.Tensor:
    """A boolean visibility mask as the kernels' additive bias: 0 where seen, -inf elsewhere."""
    return torch.where(seen, 0.0, float("-inf")).to(dtype)


class _BandBias:
    """The raw band's additive bias, [1,Tb,K]: query i (of Tb) sees raw key j (of K, the first
    at ``offset`` positions from the first query) iff 0 <= i - offset - j < local. Blocks of
    one call mostly share (offset, K, Tb), so each bias is built once."""

    def __init__(self, local: int, dtype, device):
        self.local, self.dtype, self.device, self.made = local, dtype, device, {}

    def __call__(self, offset: int, keys: int, queries: int) -> torch.Tensor:
        key = (offset, keys, queries)
        if key not in self.made:
            lag = torch.arange(queries, device=self.device)[:, None] - offset - torch.arange(keys, device=self.device)
            seen = (lag >= 0) & (lag < self.local)
            self.made[key] = _additive_bias(seen, self.dtype)[None]
        return self.made[key]


def _bulk_queries(block: int, bulk_rows: int, group: int) -> int:
    """Queries per bulk block: the fewest whole blocks giving >= bulk_rows rows (group = G)."""
    return max(1, -(-bulk_rows // (group * block))) * block


def _merge(dest, parts, seen_lse, sink_rows) -> None:
    """Complete ``dest`` [B,Hk,G,R,D] (a view of the output) with softmax parts (out
    [B,Hk,G,R,D], lse [B,Hk,G,R]): ``dest`` already holds the bulk part's output when
    ``seen_lse`` (its lse) is given, and is overwritten otherwise. The joint softmax is the
    parts weighted by exp(lse - total); the sink [1,Hk,G,1] (or None) adds exp(sink) to the
    total and nothing to the output. In place: no merged temporary."""
    lses = [lse for _, lse in parts] + ([] if seen_lse is None else [seen_lse])
    total = lses[0]
    for lse in lses[1:]:
        total = torch.logaddexp(total, lse)
    if sink_rows is not None:
        total = torch.logaddexp(total, sink_rows)
    if len(lses) == 1 and sink_rows is None:
        dest.copy_(parts[0][0])
        return
    if seen_lse is not None:
        dest.mul_(torch.exp(seen_lse - total)[..., None].to(dest.dtype))
    for i, (o, lse) in enumerate(parts):
        weight = torch.exp(lse - total)[..., None].to(o.dtype)
        if i == 0 and seen_lse is None:
            torch.mul(o, weight, out=dest)
        else:
            dest.addcmul_(o, weight)


def _per_query_head(x: torch.Tensor, n_heads: int, dim: int) -> torch.Tensor:
    """Repeat a per-KV-head tensor along ``dim`` for the query heads that share it."""
    return x.repeat_interleave(n_heads // x.shape[dim], dim=dim)


def _fused_attention(q, keys, values, mask, sink):
    """torch's fused SDPA with an additive mask. q [B,H,Tb,D], keys/values [B,Hk,K,D], mask [1 or Hk,Tb,K].

    The sink joins the softmax as one extra key with a zero value: queries get an extra
    channel of ones and the sink key carries sink/scale in it, so its logit is the sink.
    """
    h, d = q.shape[1], q.shape[-1]
    scale = d**-0.5
    bias = _additive_bias(mask, q.dtype)
    # a 4-d mask keeps torch on its fused CPU kernel (3-d falls back to the math path)
    bias = (bias if mask.shape[0] == 1 else _per_query_head(bias, h, dim=0))[None]
    if sink is None:
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=bias, scale=scale, enable_gqa=True)
    b, _, k_len, _ = keys.shape
    keys, values = _per_query_head(keys, h, dim=1), _per_query_head(values, h, dim=1)
    sink_key = torch.zeros(b, h, 1, d + 1, dtype=q.dtype, device=q.device)
    sink_key[..., -1] = (sink.to(q.dtype) / scale).view(1, h, 1)
    keys = torch.cat([F.pad(keys, (0, 1)), sink_key], dim=2)
    values = torch.cat([values, values.new_zeros(b, h, 1, d)], dim=2)
    q = F.pad(q, (0, 1), value=1.0)
    bias = F.pad(bias, (0, 1))
    return F.scaled_dot_product_attention(q, keys, values, attn_mask=bias, scale=scale)


def _segmented_attention(q, segments: list[Segment], sink):
    """Explicit softmax across key segments without concatenating them.

    Query heads sharing a KV head are folded into the row axis ([B,Hk,G*Tb,K]) so every
    product is a plain batched matmul. A query that sees nothing (and has no sink) gets
    zeros, not NaN.
    """
    b, h, t, d = q.shape
    hk = segments[0][0].shape[1]
    g = h // hk
    rows = (q.reshape(b, hk, g * t, d)) * d**-0.5
    logits, values = [], []
    for keys, vals, mask in segments:
        if keys.shape[2]:
            mask = mask[None, :, None].expand(1, hk, g, t, mask.shape[-1]).reshape(1, hk, g * t, -1)
            logits.append((rows @ keys.transpose(-1, -2)).masked_fill(~mask, float("-inf")))
            values.append(vals)
    sink = None if sink is None else sink.to(q.dtype).view(1, hk, g, 1).expand(1, hk, g, t).reshape(1, hk, g * t, 1)
    top = rows.new_full((b, hk, g * t, 1), float("-inf"))
    for part in logits:
        top = torch.maximum(top, part.amax(dim=-1, keepdim=True))
    if sink is not None:
        top = torch.maximum(top, sink)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top)).detach()
    denom = torch.zeros_like(top) if sink is None else torch.exp(sink - top)
    out = rows.new_zeros(b, hk, g * t, d)
    for part, vals in zip(logits, values, strict=True):
        weights = torch.exp(part - top)
        denom = denom + weights.sum(dim=-1, keepdim=True)
        out = out + weights @ vals
    out = out / denom.clamp_min(torch.finfo(out.dtype).tiny)
    return out.reshape(b, h, t, d)
