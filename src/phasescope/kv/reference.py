"""Slow, obviously-correct reference for one attention layer (used by the tests).

Everything is spelled out with Python loops straight from docs/design.md, 'Definitions': which tokens form
each entry, where its key is rotated, which raw tokens and entries each query sees, one
softmax (plus sink) over them, and DeepSeek-V4's value path (``value_rope``: every value is
rotated where its key is, each query's output is rotated back by its own position). Only the
projections, ``Pooler.reference_entry`` and ``attn.rope`` are shared with the fast path.

Shape legend: B batch, T tokens, C width, H query heads, Hk KV heads, D head dim.
"""

from __future__ import annotations

import torch


def reference_entries(attn, x: torch.Tensor) -> dict[int, list[tuple[int, torch.Tensor, torch.Tensor]]]:
    """Per KV head: [(end position, key [B,D] after RoPE, value [B,D])] for every complete window.

    The value is rotated at the key's position with ``value_rope``, else left as pooled."""
    scheme, pooler = attn.scheme, attn.pooler
    s, w = scheme.step, scheme.window
    _, t_len, _ = x.shape
    _, k, v = attn.project(x)
    feats = pooler.features(x, k, v)
    entries: dict[int, list] = {}
    for h in range(attn.n_kv_heads):
        align = scheme.head_align(h, attn.n_kv_heads)
        entries[h] = []
        for end in range(t_len):
            if (end - align) % s != s - 1:
                continue
            slots = [o for o in range(w) if end - w + 1 + o >= 0]
            tokens = [end - w + 1 + o for o in slots]
            key, value = pooler.reference_entry(feats[:, h, tokens], slots, h)
            if scheme.rope != "none":
                first = torch.tensor([max(end - (s if scheme.rope == "block_start" else w) + 1, 0)])
                key = attn.rope(key[:, None, :], first)[:, 0]
                if scheme.value_rope:
                    value = attn.rope(value[:, None, :], first)[:, 0]
            entries[h].append((end, key, value))
    return entries


def reference_attention(attn, x: torch.Tensor) -> torch.Tensor:
    """What ``attn(x, start_pos=0, cache=None)`` must return: [B,T,C]."""
    scheme = attn.scheme
    b, t_len, _ = x.shape
    positions = torch.arange(t_len)
    q, k, v = attn.project(x)
    q, k = attn.rope(q, positions), attn.rope(k, positions)
    if scheme.value_rope:
        v = attn.rope(v, positions)
    entries = reference_entries(attn, x) if attn.pooler is not None else {}
    group = attn.n_heads // attn.n_kv_heads
    scale = attn.head_dim**-0.5
    per_head = []
    for hq in range(attn.n_heads):
        h = hq // group
        per_query = []
        for t in range(t_len):
            keys, values = [], []
            for p in range(t_len):
                if scheme.kind == "full":
                    visible = p <= t
                else:
                    visible = t - scheme.local < p <= t
                if visible:
                    keys.append(k[:, h, p])
                    values.append(v[:, h, p])
            for end, key, value in entries.get(h, []):
                if (end < t) if scheme.visibility == "strict" else (end <= t):
                    keys.append(key)
                    values.append(value)
            logits = [(q[:, hq, t] * key).sum(-1) * scale for key in keys]
            if attn.sink is not None:
                logits.append(attn.sink[hq].expand(b))
                values.append(torch.zeros_like(q[:, hq, t]))
            if not logits:
                per_query.append(torch.zeros_like(q[:, hq, t]))
                continue
            weights = torch.softmax(torch.stack(logits, dim=1), dim=1)  # [B, n]
            out = (weights[:, :, None] * torch.stack(values, dim=1)).sum(dim=1)  # [B,D]
            if scheme.value_rope:  # rotate back by the query's position
                out = attn.rope(out[:, None, :], torch.tensor([-t]))[:, 0]
            per_query.append(out)
        per_head.append(torch.stack(per_query, dim=1))  # [B,T,D]
    out = torch.stack(per_head, dim=2)  # [B,T,H,D]
    return attn.o_proj(out.reshape(b, t_len, -1))
