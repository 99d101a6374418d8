"""A Qwen3-style decoder whose attention layers may compress their KV cache in chunks.

Top to bottom: RMSNorm, RoPE, Attention (GQA + per-head QK-norm + a per-layer compression
scheme, optionally DeepSeek-V4's rotated value path), SwiGLU MLP, Block, Decoder (embedding
with optional token-shift input, blocks, tied LM head, ``generate`` with a compressed cache).

Shape legend
    B batch, T new tokens, C model width, V vocabulary,
    H query heads, Hk KV heads, D head dim, N compressed entries, F pooling features.

Positions are explicit: a call covers positions ``start_pos .. start_pos+T-1``; with a cache,
``start_pos`` must equal the number of tokens the cache has seen.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from phasescope.errors import InputError
from phasescope.kv.attention import KVView, joint_attention
from phasescope.kv.cache import KVCache, LayerCache, cat_or_new, keep_last
from phasescope.kv.compressor import compact_entries, new_entries
from phasescope.kv.config import CompressionConfig, first_window_start, rope_positions
from phasescope.kv.poolers import POOLERS
from phasescope.kv.poolers.channel_gate import upcast
from phasescope.model.config import ModelConfig

# rope(x [..., P, D], positions broadcastable to [..., P]) -> x rotated at those positions
Rope = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = upcast(x)
        return (self.weight * x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)


class Rotary(nn.Module):
    """Qwen3/Llama RoPE (rotate-half layout) at arbitrary integer positions."""

    def __init__(self, head_dim: int, theta: float):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """x [..., P, D] with positions broadcastable to [..., P]."""
        angles = positions.to(self.inv_freq.device).double()[..., None] * self.inv_freq.double()
        cos = torch.cat([angles.cos()] * 2, dim=-1).to(x.dtype)
        sin = torch.cat([angles.sin()] * 2, dim=-1).to(x.dtype)
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return (x * cos).addcmul_(rotated, sin)  # in place: one temporary fewer


class Attention(nn.Module):
    query_block = 256  # queries per block in joint_attention (tests shrink it)
    bulk_rows = 1024  # inference: query rows per unmasked call over entries (joint_attention)
    # Inference: a compressed or sliding layer reads an input longer than ``chunked_from``
    # tokens in chunks through its cache, as a chunked prefill would: at least two (its
    # whole-input temporaries -- queries, keys, pooling features -- then exist for half the
    # input at most, which keeps it under full attention's memory from 1K tokens on), of at most
    # ``prefill_chunk`` tokens (large enough for the flash kernel's efficient tiles on long
    # inputs). Tests shrink both.
    prefill_chunk = 2048
    chunked_from = 512
    # Optional top-k style restriction of the visible entries (see kv.attention.EntrySelector).
    entry_selector = None

    def __init__(self, cfg: ModelConfig, scheme: CompressionConfig):
        super().__init__()
        self.scheme, self.n_heads, self.n_kv_heads, self.head_dim = (
            scheme,
            cfg.n_heads,
            cfg.n_kv_heads,
            cfg.head_dim,
        )
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.d_model, cfg.n_kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.n_heads * cfg.head_dim, cfg.d_model, bias=False)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.norm_eps)
        self.k_norm = RMSNorm(cfg.head_dim, cfg.norm_eps)
        self.rotary = Rotary(cfg.head_dim, cfg.rope_theta) if cfg.rope else None
        self.sink = nn.Parameter(torch.zeros(cfg.n_heads)) if scheme.sink else None
        self.pooler = (
            POOLERS[scheme.pooler](scheme, cfg.d_model, cfg.n_kv_heads, cfg.head_dim) if scheme.compressed else None
        )

    def rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return x if self.rotary is None else self.rotary(x, positions)

    def project(self, x: torch.Tensor):
        """x [B,T,C] -> q [B,H,T,D], k, v [B,Hk,T,D], with QK-norm, before RoPE."""
        b, t, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, t, self.n_heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, t, self.n_kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.n_kv_heads, self.head_dim).transpose(1, 2)
        return q, k, v

    def forward(self, x: torch.Tensor, start_pos: int, cache: LayerCache | None) -> torch.Tensor:
        """x [B,T,C] at positions start_pos.. -> [B,T,C]; appends to ``cache`` when given."""
        t = x.shape[1]
        if t > min(self.chunked_from, self.prefill_chunk) and self.scheme.kind != "full" and not _needs_grad(x, self):
            return self._forward_in_chunks(x, start_pos, cache, chunk=min(self.prefill_chunk, -(-t // 2)))
        return self._forward_whole(x, start_pos, cache)

    def _forward_whole(self, x: torch.Tensor, start_pos: int, cache: LayerCache | None) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.project(x)
        inputs = [q, k, v, self._features(x, k, v)]
        del q, k, v  # handed over whole (see _attend_owned)
        out = self._attend_owned(inputs, start_pos, cache, self.rope)
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))

    def _features(self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor | None:
        return self.pooler.features(x, k, v) if self.pooler is not None else None

    def _forward_in_chunks(self, x: torch.Tensor, start_pos: int, cache: LayerCache | None, chunk: int) -> torch.Tensor:
        """Inference: the same output as one call, read ``chunk`` tokens at a time
        through the cache. A layer with a local window then never holds the RoPE'd queries,
        keys or pooling features of the whole input, only one chunk's and the entries. (The
        chunks bypass ``__call__``: a forward hook on this module sees the whole call once.)"""
        cache = cache if cache is not None else LayerCache()
        out = torch.empty_like(x)
        for c0 in range(0, x.shape[1], chunk):
            c1 = min(x.shape[1], c0 + chunk)
            out[:, c0:c1] = self._forward_whole(x[:, c0:c1], start_pos + c0, cache)
        return out

    def attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        feats: torch.Tensor | None,
        start_pos: int,
        cache: LayerCache | None,
        rope: Rope,
    ) -> torch.Tensor:
        """Everything between the projections: q [B,H,T,D], k, v [B,Hk,T,D] (pre-RoPE), pooling
        features [B,Hk,T,F] (None without a pooler) -> attention output [B,H,T,D].

        RoPE, raw + compressed KV assembly, one joint softmax and, with ``value_rope``, the
        rotation of values and de-rotation of the output. ``rope(x, positions)`` rotates
        x [..., P, D] at positions [..., P] and ``rope(x, -positions)`` must undo it; the
        model passes its own, a test can pass another layout (transformers' DeepSeek-V4 rope).
        """
        return self._attend_owned([q, k, v, feats], start_pos, cache, rope)

    def _attend_owned(self, inputs: list, start_pos: int, cache: LayerCache | None, rope: Rope) -> torch.Tensor:
        """``attend`` on inputs [q, k, v, feats] handed over in a list it empties: this frame then
        holds the only references, so the features are freed once pooled and the pre-RoPE
        queries and keys once rotated, before attention makes its own temporaries."""
        q, k, v, feats = inputs
        inputs.clear()
        cache = cache if cache is not None else LayerCache()
        # pooled first: the features (the cache keeps the last w-1 tokens' own copy) are freed
        # before RoPE makes its temporaries
        entries = self._add_entries(cache, feats, start_pos, rope) if self.pooler is not None else {}
        del feats
        positions = torch.arange(start_pos, start_pos + q.shape[2], device=q.device)
        q = rope(q, positions)  # one at a time: the unrotated queries are freed first
        k = rope(k, positions)
        if self.scheme.value_rope:  # DeepSeek-V4: a value carries its position like its key
            v = rope(v, positions)
        # a sliding layer's prefill chunk is trimmed to the last L right after: no spare room
        room = self.scheme.kind == "full" or q.shape[2] == 1
        raw_k, raw_v = cache.raw_k.append(k, room), cache.raw_v.append(v, room)
        del k, v  # a cache that held earlier tokens copied them (a chunked prefill's later chunks)
        kv = KVView(raw_k=raw_k, raw_v=raw_v, raw_start=start_pos + q.shape[2] - raw_k.shape[2], **entries)
        out = self._attend(q, start_pos, kv)
        if self.scheme.kind != "full":  # later queries need only the last L raw tokens
            cache.raw_k.keep_last(self.scheme.local)
            cache.raw_v.keep_last(self.scheme.local)
        if self.scheme.value_rope:
            # Undo the rotation at the query position: each value then contributes rotated by
            # (its position - the query's), a relative distance, as in DeepSeek-V4.
            out = rope(out, -positions)
        return out

    def _add_entries(self, cache: LayerCache, feats: torch.Tensor, start_pos: int, rope: Rope) -> dict:
        """Pool windows completed by the new tokens and join them to the cached entries; all
        entries as KVView's fields (comp_k, comp_v, comp_end, ends_alike)."""
        pending = cache.pending
        # a call at a window boundary (no new window reaches back) that brings the next pending
        # tokens itself pools from its own features: no copy of them behind the cached ones
        if pending is not None and feats.shape[2] >= self.scheme.window - 1:
            if first_window_start(self.scheme, start_pos, feats.shape[1]) >= start_pos:
                pending = None
        buf = cat_or_new(pending, feats, 2)
        buf_start = start_pos - (0 if pending is None else pending.shape[2])
        ends, ck, cv = new_entries(self.pooler, self.scheme, buf, buf_start, start_pos)
        if ends.shape[1] and self.scheme.rope != "none":
            where = rope_positions(self.scheme, ends)  # [Hk,N]
            # without stagger every KV head's entries sit at the same positions: one row of
            # angles serves them all (RoPE's trigonometry was a tenth of a short prefill)
            ck, cv = self._rotate_entries(ck, cv, where if self.scheme.stagger else where[:1], rope)
        cache.shared_kv = self._entry_value_is_key()
        comp_k, comp_end = cache.comp_k.append(ck), cache.comp_end.append(ends)
        comp_v = comp_k if cache.shared_kv else cache.comp_v.append(cv)
        if self.scheme.stagger and comp_end.shape[1] > ends.shape[1]:
            comp_k, comp_v, comp_end = compact_entries(comp_k, comp_v, comp_end)
            cache.comp_k.replace(comp_k)
            cache.comp_v.replace(comp_v)
            cache.comp_end.replace(comp_end)
        cache.pending = keep_last(buf, self.scheme.window - 1)
        return dict(comp_k=comp_k, comp_v=comp_v, comp_end=comp_end, ends_alike=not self.scheme.stagger)

    def _rotate_entries(self, ck, cv, where: torch.Tensor, rope: Rope):
        """Entry keys (and with ``value_rope`` values) [B,Hk,N,D] rotated at ``where`` [Hk or 1,N]."""
        ck_rot = rope(ck, where)
        if not self.scheme.value_rope:
            return ck_rot, cv
        return ck_rot, ck_rot if self.pooler.shared_kv else rope(cv, where)

    def _entry_value_is_key(self) -> bool:
        """A shared K=V entry (V4) stays one tensor, stored once, unless only its key is rotated."""
        key_unrotated = self.scheme.rope == "none" or self.rotary is None
        return self.pooler.shared_kv and (self.scheme.value_rope or key_unrotated)

    def _attend(self, q: torch.Tensor, start_pos: int, kv: KVView) -> torch.Tensor:
        scheme = self.scheme
        if scheme.kind == "full" and self.sink is None:
            if kv.raw_start == start_pos:  # the control: torch's fused kernel
                return F.scaled_dot_product_attention(q, kv.raw_k, kv.raw_v, is_causal=True, enable_gqa=True)
            if q.shape[2] == 1:  # one decoded token sees the whole cache
                return F.scaled_dot_product_attention(q, kv.raw_k, kv.raw_v, enable_gqa=True)
        local = None if scheme.kind == "full" else scheme.local
        strict = scheme.visibility == "strict"
        return joint_attention(
            q,
            start_pos,
            kv,
            local=local,
            strict=strict,
            sink=self.sink,
            select=self.entry_selector,
            block=self.query_block,
            bulk_rows=self.bulk_rows,
        )


def _needs_grad(x: torch.Tensor, module: nn.Module) -> bool:
    return torch.is_grad_enabled() and (x.requires_grad or any(p.requires_grad for p in module.parameters()))


class MLP(nn.Module):
    chunk = 4096  # inference: tokens per pass, so the [T, d_ff] activations never exist at once

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.up_proj = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)
        self.down_proj = nn.Linear(cfg.d_ff, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] <= self.chunk or _needs_grad(x, self):
            return self._apply_rows(x)
        out = torch.empty_like(x)
        for c0 in range(0, x.shape[1], self.chunk):
            out[:, c0 : c0 + self.chunk] = self._apply_rows(x[:, c0 : c0 + self.chunk])
        return out

    def _apply_rows(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, scheme: CompressionConfig):
        super().__init__()
        self.attn_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.attn = Attention(cfg, scheme)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, start_pos: int, cache: LayerCache | None) -> torch.Tensor:
        x = x + self.attn(self.attn_norm(x), start_pos, cache)
        return x + self.mlp(self.mlp_norm(x))


class Decoder(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.shift = nn.Linear(cfg.d_model, cfg.d_model, bias=False) if cfg.token_shift else None
        self.blocks = nn.ModuleList([Block(cfg, scheme) for scheme in cfg.layers])
        self.norm = RMSNorm(cfg.d_model, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init_weights)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.weight

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
            if getattr(module, "bias", None) is not None:
                nn.init.zeros_(module.bias)

    def new_cache(self) -> KVCache:
        return KVCache.empty(len(self.blocks))

    def embed_tokens(self, input_ids: torch.Tensor, cache: KVCache | None) -> torch.Tensor:
        x = self.embed(input_ids)
        if self.shift is None:
            return x
        prev_first = x.new_zeros(x[:, :1].shape) if cache is None or cache.prev_embed is None else cache.prev_embed
        prev = torch.cat([prev_first, x[:, :-1]], dim=1)
        if cache is not None:
            cache.prev_embed = x[:, -1:]
        return x + self.shift(prev)

    def forward(
        self,
        input_ids: torch.Tensor,
        start_pos: int = 0,
        cache: KVCache | None = None,
        logits_at: torch.Tensor | slice | None = None,
    ) -> torch.Tensor:
        """input_ids [B,T] -> logits [B,T,V] (float32).

        logits_at: only the logits at these indices of the T new tokens (an index tensor or a
        slice), [B,P,V]. With a large vocabulary, [B,T,V] float32 logits of a long input
        outweigh everything else the forward holds.
        """
        if input_ids.dim() != 2:
            raise InputError(f"input_ids must be [batch, tokens]; got shape {tuple(input_ids.shape)}")
        if cache is not None and start_pos != cache.length:
            raise InputError(f"start_pos={start_pos} but the cache has seen {cache.length} tokens; they must match")
        if input_ids.numel() and int(input_ids.max()) >= self.cfg.vocab_size:
            raise InputError(f"token id {int(input_ids.max())} >= vocab_size {self.cfg.vocab_size}")
        x = self.embed_tokens(input_ids, cache)
        for i, block in enumerate(self.blocks):
            x = block(x, start_pos, None if cache is None else cache.layers[i])
        if cache is not None:
            cache.length += input_ids.shape[1]
        if logits_at is not None:
            x = x[:, logits_at]
        return self.lm_head(self.norm(x)).float()

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """Prefill the prompt, then decode token by token with the compressed cache.

        Returns [B, max_new_tokens]. temperature 0 = greedy.
        """
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise InputError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")
        if temperature < 0:
            raise InputError(f"temperature must be >= 0 (0: greedy), got {temperature!r}")
        cache = self.new_cache()
        logits = self(input_ids, 0, cache, logits_at=slice(-1, None))[:, -1]
        out = []
        for _ in range(max_new_tokens):
            if temperature > 0:
                probs = torch.softmax(logits / temperature, dim=-1)
                token = torch.multinomial(probs, 1, generator=generator)
            else:
                token = logits.argmax(dim=-1, keepdim=True)
            out.append(token)
            logits = self(token, cache.length, cache)[:, -1]
        return torch.cat(out, dim=1)
