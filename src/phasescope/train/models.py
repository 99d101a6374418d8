"""Building the model a recipe trains: phasescope's own decoder, or transformers' DeepseekV4."""

from __future__ import annotations

import torch
from torch import nn

from phasescope.errors import InputError
from phasescope.model.config import ModelConfig
from phasescope.model.decoder import Decoder
from phasescope.train.config import TrainConfig


def hf_deepseek_v4_config(cfg: TrainConfig):
    """A tiny DeepseekV4Config mirroring the recipe: every layer CSA with compress rate = step
    (transformers fixes w = 2s), raw sliding window = L, the indexer's top-k the recipe's
    ``index_topk`` (0: the row length, above any entry count, so every entry is kept)."""
    from transformers import DeepseekV4Config

    m, s = cfg.model, cfg.scheme
    if not (s.compressed and s.pooler == "channel_gate" and s.window == 2 * s.step and s.align == 0):
        raise InputError(
            "arch=hf-deepseek-v4 needs scheme pooler=channel_gate, window=2*step, align=0 "
            f"(what transformers implements); got {s}"
        )
    return DeepseekV4Config(
        vocab_size=m.vocab_size,
        hidden_size=m.d_model,
        moe_intermediate_size=m.d_ff,
        num_hidden_layers=m.n_layers,
        num_attention_heads=m.n_heads,
        num_key_value_heads=1,
        head_dim=m.head_dim,
        q_lora_rank=m.d_model,
        n_routed_experts=4,
        num_experts_per_tok=2,
        n_shared_experts=1,
        mlp_layer_types=["moe"] * m.n_layers,
        layer_types=["compressed_sparse_attention"] * m.n_layers,
        compress_rates={"compressed_sparse_attention": s.step, "heavily_compressed_attention": 128},
        sliding_window=max(s.local, 1),
        o_groups=1,
        o_lora_rank=m.d_model,
        index_n_heads=2,
        index_head_dim=m.head_dim,
        index_topk=cfg.index_topk or cfg.task.seq_len,
        hc_mult=1,
        partial_rotary_factor=1.0,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        tie_word_embeddings=False,
    )


class HFCausalLM(nn.Module):
    """Wraps a transformers causal LM as ``input_ids [B,T] -> logits [B,T,V]``."""

    def __init__(self, hf_model):
        super().__init__()
        self.hf = hf_model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.hf(input_ids=input_ids, use_cache=False).logits.float()


def build_model(cfg: TrainConfig, compressed: bool, seed: int) -> nn.Module:
    """Deterministic initialisation from ``seed`` without touching the global RNG stream."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if cfg.arch == "hf-deepseek-v4":
            from transformers import DeepseekV4ForCausalLM

            return HFCausalLM(DeepseekV4ForCausalLM(hf_deepseek_v4_config(cfg)))
        return Decoder(cfg.model_config(compressed=compressed))


def model_config_of(model: nn.Module) -> ModelConfig | None:
    return model.cfg if isinstance(model, Decoder) else None
