"""phasescope's own decoder (Qwen3-style, per-layer compression schemes)."""

from phasescope.model.config import PRESETS, ModelConfig, preset
from phasescope.model.decoder import Decoder

__all__ = ["PRESETS", "Decoder", "ModelConfig", "preset"]
