"""``hf:DIR``: a local transformers causal LM directory (no downloads, no remote code).

Its compression geometry comes from ``phasescope.json`` (written by phasescope's HF export)
or from a DeepSeek-V4 config (CSA compress rate, window 2x, ``sliding_window`` as the raw
window L); the retrieval task, when the model was trained by phasescope, from
``phasescope.json`` too.
"""

from __future__ import annotations

from dataclasses import dataclass

from phasescope.backends.options import BackendOptions, device_option, dtype_option, model_option, tokenizer_option
from phasescope.specs import compress_fields

PREFIX = "hf:"
SUMMARY = "a local transformers causal LM directory (config.json + safetensors); no downloads"
EXAMPLE = "hf:models/qwen3-tiny"


@dataclass(frozen=True)
class Options(BackendOptions):
    dtype: str = dtype_option()
    device: str = device_option()
    trust_remote_code: bool = model_option(
        False, "hf: run the model directory's own Python code (only if you trust its author)."
    )
    compress: str = model_option(
        "none",
        "hf: run the model with post-hoc chunked compression, e.g. mean:s=4,w=4,L=128 (keys s, w, L, a; w defaults "
        "to s): what it would do if its cache were compressed (no retraining).",
        metavar="SPEC",
        measured=True,
        logits=True,
    )
    tokenizer: str | None = tokenizer_option()

    def check(self) -> None:
        super().check()
        compress_fields(self.compress)  # refuses a malformed scheme before anything loads


def load(spec: str, options: Options):
    """The model (backends/hf_model.py: torch and transformers load only now)."""
    from phasescope.backends.hf_model import load_hf

    return load_hf(spec[len(PREFIX) :], options)
