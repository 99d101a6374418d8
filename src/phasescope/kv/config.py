"""Compression scheme configuration and window geometry (docs/design.md, 'Definitions').

Geometry of a chunked scheme with step ``s``, window ``w`` and align ``a``::

    position   0  1  2  3  4  5  6  7  8  9 10 11        (s=4, w=8, a=0)
    phase      0  1  2  3  0  1  2  3  0  1  2  3        phase = (p - a) mod s
    entry 0   [.  .  .  .  x  x  x  x]                   ends at e_0 = 3 (partial: 4 empty slots)
    entry 1               [x  x  x  x  x  x  x  x]       ends at e_1 = 7
    entry 2                           [x  x  x  x  x  x  x  x]  e_2 = 11

Entries end at every position ``e`` with ``e ≡ a - 1 (mod s)`` and cover the ``w`` tokens
``e-w+1 .. e``; slots before position 0 are empty (zero weight). With ``a > 0`` the first
entry ends at ``a - 1`` and holds only tokens ``0 .. a-1`` (a partial window), so every
token belongs to at least one entry. Phase ``s-1`` (the token completing an entry) is the
*boundary phase*.

Visibility: entry ``e`` is visible to query ``t`` iff ``t >= e`` (inclusive; DeepSeek-V4, HF,
FLA-NSA) or ``t > e`` (strict; lucidrains NSA). The raw local window shows query ``t`` the
raw tokens ``t-L+1 .. t``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from phasescope.errors import InputError
from phasescope.validation import build

KINDS = ("full", "sliding", "chunked")
VISIBILITIES = ("inclusive", "strict")
ROPE_MODES = ("block_start", "window_start", "none")


def _require(ok: bool, field: str, value, allowed: str) -> None:
    if not ok:
        raise InputError(f"compression config: {field}={value!r} is invalid; allowed: {allowed}")


@dataclass(frozen=True)
class CompressionConfig:
    """How one attention layer sees its past.

    kind:       ``full`` (plain causal attention), ``sliding`` (raw local window only) or
                ``chunked`` (raw local window + one compressed entry per window).
    step:       s, tokens between consecutive entries (>= 1).
    window:     w, tokens pooled into one entry (>= s; w > s overlaps earlier tokens).
    align:      a in [0, s): entries end at positions ≡ a-1 (mod s).
    local:      L >= 0, raw tokens t-L+1..t visible to query t (``sliding``/``chunked``).
    visibility: ``inclusive`` (t >= e) or ``strict`` (t > e).
    rope:       where compressed keys are rotated: ``block_start`` (first token of the entry's
                own step block, e-s+1, as transformers' DeepseekV4 does), ``window_start``
                (first token of the whole window, e-w+1), or ``none``. Clipped at 0 for
                partial windows.
    pooler:     registered pooler name (see ``phasescope schemes``).
    stagger:    each KV head h uses align (a + h*s // n_kv_heads) mod s.
    sink:       learned per-head attention-sink logit in the joint softmax.
    value_rope: DeepSeek-V4's value path. Values are rotated like keys (raw values at their
                own positions, compressed values at their entry's RoPE position; a shared
                K=V entry is then one rotated tensor, stored once) and the attention output
                is de-rotated at each query position before the output projection, so a
                value's contribution depends on its distance to the query, not on where it
                sits. Off: values are never rotated. Needs ``rope != "none"`` in chunked
                layers (an unrotated entry cannot be de-rotated); does nothing in a NoPE
                model (``ModelConfig.rope=False``).
    """

    kind: str = "chunked"
    step: int = 4
    window: int = 4
    align: int = 0
    local: int = 0
    visibility: str = "inclusive"
    rope: str = "block_start"
    pooler: str = "mean"
    stagger: bool = False
    sink: bool = False
    value_rope: bool = False

    def __post_init__(self) -> None:
        from phasescope.kv.poolers import POOLERS

        _require(self.kind in KINDS, "kind", self.kind, " | ".join(KINDS))
        _require(self.visibility in VISIBILITIES, "visibility", self.visibility, " | ".join(VISIBILITIES))
        _require(isinstance(self.local, int) and self.local >= 0, "local", self.local, "integer >= 0")
        _require(isinstance(self.value_rope, bool), "value_rope", self.value_rope, "True | False")
        if self.kind == "sliding":
            _require(self.local >= 1, "local", self.local, "integer >= 1 for a sliding layer")
        if self.kind != "chunked":
            return
        _require(isinstance(self.step, int) and self.step >= 1, "step", self.step, "integer >= 1")
        _require(
            isinstance(self.window, int) and self.window >= self.step,
            "window",
            self.window,
            f"integer >= step ({self.step})",
        )
        _require(
            isinstance(self.align, int) and 0 <= self.align < self.step,
            "align",
            self.align,
            f"integer in [0, {self.step})",
        )
        _require(self.rope in ROPE_MODES, "rope", self.rope, " | ".join(ROPE_MODES))
        _require(
            not (self.value_rope and self.rope == "none"),
            "value_rope",
            self.value_rope,
            'False when rope="none" (values are rotated like the compressed keys; give rope a position mode)',
        )
        _require(self.pooler in POOLERS, "pooler", self.pooler, " | ".join(sorted(POOLERS)))
        POOLERS[self.pooler].check_geometry(self)

    @property
    def compressed(self) -> bool:
        return self.kind == "chunked"

    def head_align(self, kv_head: int, n_kv_heads: int) -> int:
        """Align of one KV head (differs per head only with ``stagger``)."""
        if not self.stagger:
            return self.align
        return (self.align + kv_head * self.step // n_kv_heads) % self.step

    def phase(self, position: int, kv_head: int = 0, n_kv_heads: int = 1) -> int:
        return (position - self.head_align(kv_head, n_kv_heads)) % self.step

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> CompressionConfig:
        return build(cls, data, "compression config")


def entry_range(start: int, stop: int, step: int, align: int) -> range:
    """Positions e in [start, stop) where an entry completes (e ≡ align-1 mod step), as a range
    (its length is the count, without holding the positions)."""
    first_end = (align - 1) % step
    lo = max(start, first_end)
    first = lo + (first_end - lo) % step
    return range(first, max(first, stop), step)


def entry_ends(start: int, stop: int, step: int, align: int) -> torch.Tensor:
    """Positions e in [start, stop) where an entry completes (e ≡ align-1 mod step)."""
    ends = entry_range(start, stop, step, align)
    return torch.arange(ends.start, ends.stop, ends.step, dtype=torch.long)


def head_entry_ends(cfg: CompressionConfig, start: int, stop: int, n_kv_heads: int) -> torch.Tensor:
    """Entry end positions per KV head completing in [start, stop): LongTensor[Hk, N].

    Heads with fewer entries (``stagger``) are padded with ``PAD_END`` (never visible).
    """
    if not cfg.stagger:  # every head alike: one row (a decode step mostly asks for none)
        return entry_ends(start, stop, cfg.step, cfg.align).repeat(n_kv_heads, 1)
    per_head = [entry_ends(start, stop, cfg.step, cfg.head_align(h, n_kv_heads)) for h in range(n_kv_heads)]
    n = max(len(e) for e in per_head)
    out = torch.full((n_kv_heads, n), PAD_END, dtype=torch.long)
    for h, ends in enumerate(per_head):
        out[h, : len(ends)] = ends
    return out


def first_window_start(cfg: CompressionConfig, start: int, n_kv_heads: int) -> int:
    """Where the earliest window completing at or after ``start`` (of any KV head) begins."""
    first_ends = (
        entry_range(start, start + cfg.step, cfg.step, cfg.head_align(h, n_kv_heads)).start for h in range(n_kv_heads)
    )
    return min(first_ends) - cfg.window + 1


# An end position no query ever reaches: padding slots of staggered heads.
PAD_END = 2**62


def rope_positions(cfg: CompressionConfig, ends: torch.Tensor) -> torch.Tensor:
    """RoPE position of each compressed entry given its end position (same shape)."""
    span = cfg.step if cfg.rope == "block_start" else cfg.window
    return (ends - span + 1).clamp_min(0)
