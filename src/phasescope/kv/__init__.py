"""Chunked KV-cache compression: geometry, poolers, the joint attention function, the cache."""

from phasescope.kv.attention import KVView, joint_attention
from phasescope.kv.cache import KVCache, LayerCache
from phasescope.kv.config import CompressionConfig, entry_ends, head_entry_ends, rope_positions
from phasescope.kv.poolers import POOLERS
from phasescope.kv.schemes import SCHEMES, scheme

__all__ = [
    "POOLERS",
    "SCHEMES",
    "CompressionConfig",
    "KVCache",
    "KVView",
    "LayerCache",
    "entry_ends",
    "head_entry_ends",
    "joint_attention",
    "rope_positions",
    "scheme",
]
