"""Named compression schemes: the published designs and the project's tiny defaults."""

from __future__ import annotations

from phasescope.errors import InputError
from phasescope.kv.config import CompressionConfig

SCHEMES: dict[str, tuple[CompressionConfig, str]] = {
    "full": (CompressionConfig(kind="full"), "plain causal attention (the control)"),
    "sliding-128": (CompressionConfig(kind="sliding", local=128), "raw sliding window of 128 tokens only"),
    "v4-csa": (
        CompressionConfig(step=4, window=8, local=128, pooler="channel_gate", sink=True, value_rope=True),
        "DeepSeek-V4 CSA layer (without the top-k indexer): s=4, w=8, 128 raw tokens, sink, values rotated like keys",
    ),
    "v4-hca": (
        CompressionConfig(step=128, window=128, local=128, pooler="channel_gate", sink=True, value_rope=True),
        "DeepSeek-V4 HCA layer: s=w=128, 128 raw tokens, sink, values rotated like keys",
    ),
    "v4.1": (
        CompressionConfig(step=2, window=2, local=128, pooler="channel_gate_nobias", sink=True, value_rope=True),
        "DeepSeek-V4.1 compressor: s=w=2, no position bias, values rotated like keys",
    ),
    "study": (
        CompressionConfig(step=8, window=8, local=16, pooler="scalar_gate"),
        "the study's Qwen3-0.6B reproduction: s=w=8, scalar gate per offset, 16 raw tokens",
    ),
    "nsa": (
        CompressionConfig(step=16, window=32, local=512, pooler="mlp", visibility="strict"),
        "NSA compression branch: block 32, stride 16, MLP pooler, strict visibility",
    ),
    "tiny-4": (
        CompressionConfig(step=4, window=4, local=8, pooler="scalar_gate"),
        "tiny CPU default: s=w=4, scalar gate, 8 raw tokens",
    ),
    "tiny-4-stagger": (
        CompressionConfig(step=4, window=4, local=8, pooler="scalar_gate", stagger=True),
        "tiny-4 with per-KV-head staggered align (a mitigation; no published design has it)",
    ),
}


def scheme(name: str, **overrides) -> CompressionConfig:
    """A named scheme, optionally with fields overridden (validated again)."""
    if name not in SCHEMES:
        raise InputError(f"unknown scheme {name!r}; known: {', '.join(SCHEMES)} (see `phasescope schemes`)")
    base = SCHEMES[name][0].to_dict()
    unknown = sorted(set(overrides) - set(base))
    if unknown:
        raise InputError(f"scheme {name!r}: unknown fields {unknown}; known: {sorted(base)}")
    return CompressionConfig(**{**base, **overrides})
