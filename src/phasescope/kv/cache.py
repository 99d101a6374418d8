"""The compressed KV cache used by ``generate``.

Per layer it keeps only: the last L raw keys/values (all of them for ``full`` layers), the
pooling features of the last w-1 tokens (the state of the window being filled), and one
key/value entry per completed window.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


@dataclass
class LayerCache:
    raw_k: torch.Tensor | None = None  # [B,Hk,S,D], post-RoPE, positions length-S .. length-1
    raw_v: torch.Tensor | None = None
    comp_k: torch.Tensor | None = None  # [B,Hk,N,D], post-RoPE
    comp_v: torch.Tensor | None = None
    comp_end: torch.Tensor | None = None  # [Hk,N]
    pending: torch.Tensor | None = None  # [B,Hk,P,F], P <= w-1

    def tensors(self) -> list[torch.Tensor]:
        items = (self.raw_k, self.raw_v, self.comp_k, self.comp_v, self.pending)
        return [t for t in items if t is not None]


@dataclass
class KVCache:
    layers: list[LayerCache]
    length: int = 0  # tokens already seen; the next token sits at this position
    prev_embed: torch.Tensor | None = None  # [B,C], last input embedding (token-shift input)
    extra: dict = field(default_factory=dict)

    @classmethod
    def empty(cls, n_layers: int) -> KVCache:
        return cls(layers=[LayerCache() for _ in range(n_layers)])

    def nbytes(self, include_pending: bool = True) -> int:
        """Bytes of memory the cache keeps alive (each underlying storage counted once)."""
        storages = {}
        for layer in self.layers:
            tensors = (
                layer.tensors() if include_pending else [t for t in layer.tensors() if t is not layer.pending]
            )
            for t in tensors:
                storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return sum(storages.values())


def cat_or_new(old: torch.Tensor | None, new: torch.Tensor, dim: int) -> torch.Tensor:
    return new if old is None else torch.cat([old, new], dim=dim)


def compact(x: torch.Tensor | None) -> torch.Tensor | None:
    """x itself, or a copy when x is a view that keeps a larger buffer alive."""
    if x is None or x.untyped_storage().nbytes() == x.numel() * x.element_size():
        return x
    return x.clone(memory_format=torch.contiguous_format)


def keep_last(x: torch.Tensor, n: int) -> torch.Tensor:
    """The last n positions along dim 2, in a buffer of their own."""
    return compact(x[:, :, max(x.shape[2] - n, 0) :])
