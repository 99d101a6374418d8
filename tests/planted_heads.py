"""A model whose heads serve known phases, for the head-ablation tests.

It answers kv-retrieval by lookup (the token after the last earlier copy of the query's key)
and routes that answer through H heads of one layer: head h writes the one-hot answer into its
D = V slot of the output projection's input only when the answer's value sits at a phase in
``serves[h]``; the projection sums the heads. Removing a head that alone serves phase φ leaves
only pseudo-random noise at φ, so the planted truth is known exactly.

Shape legend: B rows, T tokens, H heads, V vocabulary.
"""

import torch
import torch.nn.functional as F
from torch import nn

GAIN = 4.0  # a served answer's logit; the noise stays within +-NOISE


class PlantedAttention(nn.Module):
    def __init__(self, vocab: int, n_heads: int):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, vocab
        self.o_proj = nn.Linear(n_heads * vocab, vocab, bias=False)
        with torch.no_grad():
            self.o_proj.weight.copy_(GAIN * torch.eye(vocab).repeat(1, n_heads))


class PlantedBlock(nn.Module):
    def __init__(self, vocab: int, n_heads: int):
        super().__init__()
        self.attn = PlantedAttention(vocab, n_heads)


class PlantedHeads(nn.Module):
    """``serves[h]``: the phases (value position mod ``step``) at which head h carries the answer."""

    def __init__(self, vocab: int, step: int, serves: list[set[int]], noise: float = 3.0):
        super().__init__()
        self.vocab, self.step, self.serves, self.noise = vocab, step, serves, noise
        self.blocks = nn.ModuleList([PlantedBlock(vocab, len(serves))])

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        _, t = ids.shape
        pos = torch.arange(t)
        match = (ids[:, :, None] == ids[:, None, :]) & (pos[None, :] < pos[:, None] - 1)[None]  # [B,T,T]
        last = torch.where(match, pos, -1).max(-1).values  # [B,T] the key's last earlier copy, -1 if none
        value_pos = (last + 1).clamp(max=t - 1)
        value = ids.gather(1, value_pos)
        phase = value_pos % self.step
        gates = [torch.isin(phase, torch.tensor(sorted(s), dtype=torch.long)) & (last >= 0) for s in self.serves]
        heads = torch.stack(gates, -1).float()[..., None] * F.one_hot(value, self.vocab).float()[:, :, None]
        return self.blocks[0].attn.o_proj(heads.flatten(2)) + self.noise * self._noise(ids)

    def _noise(self, ids: torch.Tensor) -> torch.Tensor:
        """Deterministic pseudo-random numbers in [-1, 1) per row prefix (tokens and their order) and token."""
        order = torch.arange(1, ids.shape[1] + 1, dtype=torch.float64)
        x = (ids.double() * order.sqrt()).cumsum(1)[..., None] * 12.9898 + torch.arange(self.vocab).double() * 78.233
        frac = torch.sin(x) * 43758.5453
        return (2 * (frac - frac.floor()) - 1).float()
