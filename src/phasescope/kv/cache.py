"""The compressed KV cache used by ``generate``.

Shape legend
    B batch, Hk KV heads, S raw keys kept (the last L; all in a full layer), N compressed entries,
    D head dim, P pending tokens (the last w-1; w = window), F pooling features, C model width.

Per layer it keeps only: the last L raw keys/values (all of them for ``full`` layers), the
pooling features of the last w-1 tokens (the state of the window being filled), and one
key/value entry per completed window.

Appends are amortised O(1): each sequence lives in a buffer with spare capacity (at most
max(64, 1/8 of its length)), so a decode step does not copy the whole cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch


class Growable:
    """A tensor that grows at the end of ``dim`` and can drop its oldest items."""

    def __init__(self, dim: int):
        self.dim = dim
        self.data: torch.Tensor | None = None  # the live items followed by spare capacity
        self.length = 0

    def view(self) -> torch.Tensor | None:
        return None if self.data is None else self.data.narrow(self.dim, 0, self.length)

    def append(self, x: torch.Tensor, room: bool = True) -> torch.Tensor:
        """Add x at the end; returns all live items. ``room``: a grown buffer keeps spare
        capacity for later appends (False when the caller trims it right after)."""
        n_new = x.shape[self.dim]
        if self.data is None:
            self.data, self.length = x, n_new
            return x
        if torch.is_grad_enabled() and (x.requires_grad or self.data.requires_grad):
            self.data = torch.cat([self.view(), x], dim=self.dim)  # keep autograd history intact
            self.length = self.data.shape[self.dim]
            return self.data
        total = self.length + n_new
        if total > self.data.shape[self.dim]:
            capacity = total + (max(64, total // 8) if room else 0)
            shape = list(x.shape)
            shape[self.dim] = capacity
            grown = x.new_empty(shape)
            grown.narrow(self.dim, 0, self.length).copy_(self.view())
            self.data = grown
        self.data.narrow(self.dim, self.length, n_new).copy_(x)
        self.length = total
        return self.view()

    def keep_last(self, n: int) -> None:
        """Drop all but the newest n items (a view; copied only to free a much larger buffer)."""
        drop = max(self.length - n, 0)
        if drop:
            self.data = self.data.narrow(self.dim, drop, self.data.shape[self.dim] - drop)
            self.length -= drop
            if self.data.untyped_storage().nbytes() > 2 * self.data.numel() * self.data.element_size():
                self.data = self.data.clone()  # do not pin a prefill-sized buffer

    def replace(self, x: torch.Tensor) -> None:
        self.data, self.length = x, x.shape[self.dim]

    def nbytes(self) -> int:
        return 0 if self.data is None else self.view().numel() * self.data.element_size()

    def storage(self) -> torch.UntypedStorage | None:
        return None if self.data is None else self.data.untyped_storage()


@dataclass
class LayerCache:
    raw_k: Growable = field(default_factory=lambda: Growable(2))  # [B,Hk,S,D] post-RoPE
    raw_v: Growable = field(default_factory=lambda: Growable(2))  # [B,Hk,S,D], post-RoPE only with value_rope
    comp_k: Growable = field(default_factory=lambda: Growable(2))  # [B,Hk,N,D] post-RoPE
    comp_v: Growable = field(default_factory=lambda: Growable(2))  # [B,Hk,N,D], unused when K=V is shared
    comp_end: Growable = field(default_factory=lambda: Growable(1))  # [Hk,N] long
    pending: torch.Tensor | None = None  # [B,Hk,P,F], P <= w-1
    shared_kv: bool = False  # compressed values are the keys themselves (stored once)

    def buffers(self) -> list[Growable]:
        values = [] if self.shared_kv else [self.comp_v]
        return [self.raw_k, self.raw_v, self.comp_k, *values]


@dataclass
class KVCache:
    layers: list[LayerCache]
    length: int = 0  # tokens already seen; the next token sits at this position
    prev_embed: torch.Tensor | None = None  # [B,1,C], last input embedding (token-shift input)

    @classmethod
    def empty(cls, n_layers: int) -> KVCache:
        return cls(layers=[LayerCache() for _ in range(n_layers)])

    def nbytes(self, include_pending: bool = True) -> int:
        """Bytes of keys, values (and pooling state) the cache holds; excludes spare capacity."""
        total = 0
        for layer in self.layers:
            total += sum(buf.nbytes() for buf in layer.buffers())
            if include_pending and layer.pending is not None:
                total += layer.pending.numel() * layer.pending.element_size()
        return total

    def allocated_nbytes(self) -> int:
        """Bytes of memory the cache keeps alive, spare capacity included (storages counted once)."""
        storages = {}
        for layer in self.layers:
            tensors = [buf.storage() for buf in layer.buffers()]
            if layer.pending is not None:
                tensors.append(layer.pending.untyped_storage())
            for storage in tensors:
                if storage is not None:
                    storages[storage.data_ptr()] = storage.nbytes()
        return sum(storages.values())


def cat_or_new(old: torch.Tensor | None, new: torch.Tensor, dim: int) -> torch.Tensor:
    return new if old is None else torch.cat([old, new], dim=dim)


def keep_last(x: torch.Tensor, n: int) -> torch.Tensor:
    """The last n positions along dim 2 (pending features [B,Hk,P,F]), in a buffer of their own."""
    x = x[:, :, max(x.shape[2] - n, 0) :]
    return x if x.untyped_storage().nbytes() == x.numel() * x.element_size() else x.clone()
