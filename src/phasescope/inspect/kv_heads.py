"""KV-head interventions: hide one KV head's compressed entries (issue #23).

Shape legend: B batch, H query heads, Hk KV heads, D head dim, Tb queries of one attention
block, Nb compressed entries that block may read.

In a compressed layer every KV head has its own compressor, and the query heads of its group
read only its entries. The phase effect is made where the entries are made, so the component to
remove is a whole KV head's entries: ``hide_kv_entries`` makes them invisible to every query
of the layer (through the attention's ``entry_selector`` hook, kv.attention.EntrySelector),
while the raw window, the other KV heads and every weight stay as they are. A query head whose
KV head is hidden still sees its raw window (and the sink), so retrieval from beyond the raw
window is what it loses.

Works on a phasescope ``Decoder`` (or any module with ``blocks[i].attn`` carrying ``scheme``,
``n_kv_heads`` and ``entry_selector``); transformers models are refused (their entries are
built inside the library's attention).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from phasescope.errors import InputError


@dataclass
class KVSite:
    """One compressed layer's attention module and its number of KV heads."""

    layer: int
    attn: torch.nn.Module
    n_heads: int  # KV heads (named n_heads so ablation code treats heads and KV heads alike)


def kv_sites(module) -> list[KVSite | None]:
    """Per layer: its KVSite, or None for a layer without compressed entries (full or sliding)."""
    blocks = getattr(module, "blocks", None)
    if blocks is None or not all(hasattr(b.attn, "entry_selector") for b in blocks):
        raise InputError(
            f"cannot hide KV-head entries in {type(module).__name__}: the kv-entries component needs a phasescope "
            "model (transformers models build their compressed entries inside the library)"
        )
    return [
        KVSite(i, b.attn, b.attn.n_kv_heads) if getattr(b.attn.scheme, "compressed", False) else None
        for i, b in enumerate(blocks)
    ]


def check_kv_heads(sites: list[KVSite | None], pairs: Iterable) -> list[tuple[int, int]]:
    out = []
    for pair in pairs:
        layer, head = (int(v) for v in pair)
        if not 0 <= layer < len(sites):
            raise InputError(f"layer {layer} is invalid; the model has layers 0..{len(sites) - 1}")
        if sites[layer] is None:
            raise InputError(f"layer {layer} has no compressed entries (full or sliding attention): nothing to hide")
        if not 0 <= head < sites[layer].n_heads:
            raise InputError(
                f"KV head {head} of layer {layer} is invalid; the layer has KV heads 0..{sites[layer].n_heads - 1}"
            )
        out.append((layer, head))
    return out


def _hiding(heads: list[int], previous):
    """An entry selector that keeps what ``previous`` keeps, except every entry of ``heads``:
    (q_block [B,H,Tb,D], comp_k [B,Hk,Nb,D], visible [Hk,Tb,Nb]) -> keep [Hk,Tb,Nb]."""

    def select(q_block: torch.Tensor, comp_k: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        keep = torch.ones_like(visible) if previous is None else previous(q_block, comp_k, visible).clone()
        keep[heads] = False  # visible is [Hk, Tb, Nb]: KV head first
        return keep

    return select


@contextlib.contextmanager
def hide_kv_entries(module, pairs: Iterable[tuple[int, int]]) -> Iterator[None]:
    """Inside the block, the compressed entries of each (layer, KV head) are invisible to every
    query; the layers' previous entry selectors are restored on exit, also after an error."""
    sites = kv_sites(module)
    by_layer: dict[int, list[int]] = {}
    for layer, head in check_kv_heads(sites, pairs):
        by_layer.setdefault(layer, []).append(head)
    saved = []
    try:
        for layer, heads in by_layer.items():
            attn = sites[layer].attn
            saved.append((attn, attn.__dict__.get("entry_selector", _UNSET)))
            attn.entry_selector = _hiding(heads, attn.entry_selector)
        yield
    finally:
        for attn, previous in reversed(saved):
            if previous is _UNSET:
                del attn.entry_selector  # back to the class attribute (None)
            else:
                attn.entry_selector = previous


_UNSET = object()
