"""``hf:DIR``: a local transformers causal LM directory (no downloads, no remote code).

Its compression geometry comes from ``phasescope.json`` (written by phasescope's HF export)
or from a DeepSeek-V4 config (CSA compress rate, window 2x, ``sliding_window`` as the raw
window L); the retrieval task, when the model was trained by phasescope, from
``phasescope.json`` too.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from phasescope.backends.base import LoadedModel
from phasescope.backends.native import fingerprint_file
from phasescope.errors import InputError


def load_hf(path: str | Path, trust_remote_code: bool = False) -> LoadedModel:
    from transformers import AutoConfig, AutoModelForCausalLM

    path = Path(path)
    if not (path / "config.json").exists():
        raise InputError(f"hf:{path} is not a transformers model directory (no config.json)")
    config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    model.eval()
    meta = json.loads((path / "phasescope.json").read_text()) if (path / "phasescope.json").exists() else {}
    geometry = meta.get("compression") or _geometry_from_config(config)

    def logits(ids: torch.Tensor) -> torch.Tensor:
        return model(input_ids=ids, use_cache=False).logits.float()

    tokenizer = None
    if (path / "tokenizer.json").exists() or (path / "tokenizer_config.json").exists():
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    weights = sorted(path.glob("*.safetensors"))
    return LoadedModel(
        logits=logits,
        vocab_size=config.vocab_size,
        step=geometry.get("step"),
        align=geometry.get("align", 0),
        window=geometry.get("window"),
        local=geometry.get("local"),
        fingerprint=fingerprint_file(weights[0]) if weights else "",
        task=meta.get("task"),
        description=f"hf:{path}",
        tokenizer=tokenizer,
        bos_id=getattr(tokenizer, "bos_token_id", None),
    )


def _geometry_from_config(config) -> dict:
    """DeepSeek-V4: CSA step m, overlapping window 2m, and the raw sliding window L."""
    rates = getattr(config, "compress_rates", None) or {}
    step = rates.get("compressed_sparse_attention")
    if not step:
        return {}
    return {"step": step, "window": 2 * step, "align": 0, "local": getattr(config, "sliding_window", None)}
