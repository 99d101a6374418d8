"""Where each attention head's output lives, and hooks that remove it.

Shape legend: B rows in a batch, T tokens, H heads, D head dim, G output groups (DeepSeek-V4).

Every supported model mixes its heads through one output projection whose *input* holds the
heads side by side, head-major: ``[B,T,H*D]`` (phasescope's ``o_proj``; Llama/Qwen-style
``self_attn.o_proj``) or ``[B,T,G,H*D/G]`` (DeepSeek-V4's grouped ``o_a_proj``: G consecutive
heads per group, so flattening the last two dims gives the same head-major layout). A forward
*pre*-hook on that projection can therefore replace head h's D numbers before any mixing.

Modes of removal:

* ``zero``: head h's output becomes 0.
* ``mean``: it becomes its mean over a reference set of tokens (``record_means``).
* ``resample``: it becomes the same head's output, at the same position, on the row ``shift``
  rows earlier in the batch (rolled). The ablation sweep builds batches of every content at one
  offset, so the donor is another content with the same layout (``ablation.ablation_matrix``).
  Donors come from the same forward pass: when heads of several layers are removed together, a
  later layer's donor already sees the earlier layers' removal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from phasescope.errors import InputError

MODES = ("zero", "mean", "resample")


@dataclass
class HeadSite:
    """One layer's output projection; its forward input holds the layer's H heads, head-major."""

    layer: int
    proj: torch.nn.Module
    n_heads: int
    head_dim: int


def head_sites(module) -> list[HeadSite]:
    """The output projection of every attention layer of a phasescope ``Decoder`` (or any module
    with ``blocks[i].attn.{o_proj, n_heads, head_dim}``) or a transformers causal LM whose layers
    have ``self_attn.o_proj`` (Llama, Qwen) or ``self_attn.o_a_proj`` (DeepSeek-V4)."""
    if module is None:
        raise InputError(
            "head ablation needs the model's weights in this process: a phasescope model directory, an hf: model "
            "or an in-memory module (a served model, openai:, cannot be ablated)"
        )
    if hasattr(module, "blocks"):
        return [HeadSite(i, b.attn.o_proj, b.attn.n_heads, b.attn.head_dim) for i, b in enumerate(module.blocks)]
    config = getattr(module, "config", None)
    layers = getattr(getattr(module, "model", None), "layers", None)
    if config is None or layers is None:
        raise InputError(
            f"cannot find attention heads in {type(module).__name__}: ablation supports phasescope models and "
            "transformers models with model.layers[i].self_attn.o_proj (Llama/Qwen style) or .o_a_proj (DeepSeek-V4)"
        )
    n_heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // n_heads
    sites = []
    for i, layer in enumerate(layers):
        attn = layer.self_attn
        proj = getattr(attn, "o_a_proj", None) or getattr(attn, "o_proj", None)
        if proj is None:
            raise InputError(f"layer {i} of {type(module).__name__} has no o_proj / o_a_proj: cannot ablate its heads")
        width = proj.in_features * getattr(proj, "n_groups", 1)
        if width != n_heads * head_dim:
            raise InputError(
                f"layer {i}: the output projection reads {width} features, not heads x head_dim = "
                f"{n_heads} x {head_dim}; this architecture's head layout is not supported"
            )
        sites.append(HeadSite(i, proj, n_heads, head_dim))
    return sites


def check_heads(sites: list[HeadSite], heads: Iterable) -> list[tuple[int, int]]:
    out = []
    for pair in heads:
        layer, head = (int(v) for v in pair)
        if not 0 <= layer < len(sites):
            raise InputError(f"layer {layer} is invalid; the model has layers 0..{len(sites) - 1}")
        if not 0 <= head < sites[layer].n_heads:
            last = sites[layer].n_heads - 1
            raise InputError(f"head {head} of layer {layer} is invalid; the layer has heads 0..{last}")
        out.append((layer, head))
    return out


def _as_heads(x: torch.Tensor, site: HeadSite) -> torch.Tensor:
    """The projection's input [..., H*D] or [..., G, H*D/G] viewed as [..., H, D]."""
    width = site.n_heads * site.head_dim
    lead = x.shape[:-1] if x.shape[-1] == width else x.shape[:-2]
    return x.reshape(*lead, site.n_heads, site.head_dim)


@dataclass
class Resample:
    """Where a resampled head's donor row is: ``shift`` rows earlier in the batch (set per batch)."""

    shift: int = 1


@contextlib.contextmanager
def ablate_heads(
    module,
    heads: Iterable[tuple[int, int]],
    mode: str = "zero",
    means: dict[int, torch.Tensor] | None = None,
    resample: Resample | None = None,
) -> Iterator[None]:
    """Inside the block, each (layer, head)'s output is removed (``MODES``). mode "mean" needs
    ``means`` (``record_means``: per layer [H, D]). The hooks are always removed on exit."""
    if mode not in MODES:
        raise InputError(f"mode={mode!r} is invalid; allowed: {', '.join(MODES)}")
    sites = head_sites(module)
    by_layer: dict[int, list[int]] = {}
    for layer, head in check_heads(sites, heads):
        by_layer.setdefault(layer, []).append(head)
    if mode == "mean" and (means is None or any(layer not in means for layer in by_layer)):
        raise InputError('mode="mean" needs means=record_means(...) for every ablated layer')
    resample = resample or Resample()

    def pre_hook(site: HeadSite, head_list: list[int]):
        def replace(_module, args):
            x = args[0].clone()
            view = _as_heads(x, site)  # a view: writing into it writes into x
            for h in head_list:
                if mode == "zero":
                    view[..., h, :] = 0
                elif mode == "mean":
                    view[..., h, :] = means[site.layer][h].to(device=x.device, dtype=x.dtype)
                else:
                    if x.shape[0] <= resample.shift:
                        raise InputError("resample needs batches of at least two contents (donors from other rows)")
                    view[..., h, :] = _as_heads(args[0], site)[..., h, :].roll(resample.shift, dims=0)
            return (x, *args[1:])

        return replace

    handles = []
    try:
        for layer, head_list in by_layer.items():
            site = sites[layer]
            handles.append(site.proj.register_forward_pre_hook(pre_hook(site, head_list)))
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextlib.contextmanager
def record_means(module) -> Iterator[dict[int, torch.Tensor]]:
    """Inside the block every forward adds to each layer's head outputs; on exit the dict yielded
    holds per layer their mean over every token seen, [H, D]."""
    sites = head_sites(module)
    sums: dict[int, list] = {}

    def hook(site: HeadSite):
        def record(_module, args):
            x = _as_heads(args[0].detach(), site).double().cpu()
            acc = sums.setdefault(site.layer, [torch.zeros(site.n_heads, site.head_dim, dtype=torch.float64), 0])
            acc[0] += x.reshape(-1, site.n_heads, site.head_dim).sum(0)
            acc[1] += x.reshape(-1, site.n_heads, site.head_dim).shape[0]

        return record

    means: dict[int, torch.Tensor] = {}
    handles = [site.proj.register_forward_pre_hook(hook(site)) for site in sites]
    try:
        yield means
    finally:
        for handle in handles:
            handle.remove()
        for layer, (total, count) in sums.items():
            means[layer] = (total / max(count, 1)).float()
