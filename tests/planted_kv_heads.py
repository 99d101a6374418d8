"""A model whose KV heads serve known phases, for the KV-head ablation tests (issue #23).

Like planted_heads.PlantedHeads it answers kv-retrieval by lookup, but the answer reaches the
output only through the *compressed entries* of its KV heads: KV head h carries the answer when
the value sits at a phase in ``serves[h]`` and its entries are visible. Visibility is asked of
the layer's ``entry_selector`` (the hook inspect.kv_heads.hide_kv_entries sets) exactly as the
real attention asks it: selector(q_block, comp_k, visible [Hk, Tb, Nb]) -> entries kept.

Shape legend: B rows, T tokens, Hk KV heads, V vocabulary.
"""

import torch
import torch.nn.functional as F
from torch import nn

from phasescope.kv.config import CompressionConfig

GAIN = 4.0


class PlantedKVAttention(nn.Module):
    entry_selector = None  # set by hide_kv_entries, as on phasescope's Attention

    def __init__(self, n_kv_heads: int, step: int):
        super().__init__()
        self.n_kv_heads, self.n_heads = n_kv_heads, n_kv_heads
        self.scheme = CompressionConfig(step=step, window=step, local=0, pooler="mean")

    def visible_heads(self) -> torch.Tensor:
        """[Hk] bool: KV heads whose entries the selector keeps (one query, one entry each)."""
        visible = torch.ones(self.n_kv_heads, 1, 1, dtype=torch.bool)
        if self.entry_selector is None:
            return visible[:, 0, 0]
        kept = self.entry_selector(
            torch.zeros(1, self.n_kv_heads, 1, 1), torch.zeros(1, self.n_kv_heads, 1, 1), visible
        )
        return (kept & visible)[:, 0, 0]


class PlantedKVBlock(nn.Module):
    def __init__(self, n_kv_heads: int, step: int):
        super().__init__()
        self.attn = PlantedKVAttention(n_kv_heads, step)


class PlantedKVHeads(nn.Module):
    """``serves[h]``: the phases (value position mod ``step``) at which KV head h's entries carry the answer."""

    def __init__(self, vocab: int, step: int, serves: list[set[int]], noise: float = 3.0):
        super().__init__()
        self.vocab, self.step, self.serves, self.noise = vocab, step, serves, noise
        self.blocks = nn.ModuleList([PlantedKVBlock(len(serves), step)])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        _, t = ids.shape
        pos = torch.arange(t)
        match = (ids[:, :, None] == ids[:, None, :]) & (pos[None, :] < pos[:, None] - 1)[None]  # [B,T,T]
        last = torch.where(match, pos, -1).max(-1).values  # the key's last earlier copy, -1 if none
        value_pos = (last + 1).clamp(max=t - 1)
        value = ids.gather(1, value_pos)
        phase = value_pos % self.step
        visible = self.blocks[0].attn.visible_heads()
        served = torch.zeros_like(phase, dtype=torch.bool)
        for h, phases in enumerate(self.serves):
            if visible[h]:
                served |= torch.isin(phase, torch.tensor(sorted(phases), dtype=torch.long))
        served &= last >= 0
        return GAIN * served[..., None].float() * F.one_hot(value, self.vocab).float() + self.noise * self._noise(ids)

    def _noise(self, ids: torch.Tensor) -> torch.Tensor:
        """Deterministic pseudo-random numbers in [-1, 1) per row prefix and token (as PlantedHeads)."""
        order = torch.arange(1, ids.shape[1] + 1, dtype=torch.float64)
        x = (ids.double() * order.sqrt()).cumsum(1)[..., None] * 12.9898 + torch.arange(self.vocab).double() * 78.233
        frac = torch.sin(x) * 43758.5453
        return (2 * (frac - frac.floor()) - 1).float()
