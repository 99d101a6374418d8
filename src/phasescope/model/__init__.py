"""phasescope's own decoder (Qwen3-style, per-layer compression schemes)."""

from phasescope.model.config import PRESETS, ModelConfig, preset
from phasescope.model.decoder import Decoder
from phasescope.model.memory import cache_bytes, measured_cache_bytes, savings

__all__ = ["PRESETS", "Decoder", "ModelConfig", "cache_bytes", "measured_cache_bytes", "preset", "savings"]
