"""Registry of poolers: one file per member, looked up by name."""

from phasescope.kv.poolers.base import Pooler
from phasescope.kv.poolers.channel_gate import ChannelGateNoBiasPooler, ChannelGatePooler
from phasescope.kv.poolers.mean import MeanPooler
from phasescope.kv.poolers.mlp import MLPPooler
from phasescope.kv.poolers.scalar_gate import ScalarGatePooler

POOLERS: dict[str, type[Pooler]] = {
    cls.name: cls for cls in (MeanPooler, ScalarGatePooler, ChannelGatePooler, ChannelGateNoBiasPooler, MLPPooler)
}

__all__ = ["POOLERS", "Pooler"]
