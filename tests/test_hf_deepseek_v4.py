"""Our channel_gate compressor vs transformers' DeepseekV4 compressors on the same weights.

A tiny DeepseekV4Config (no downloads). CSA: s=4, w=2s=8 (two kv/gate series); HCA: s=w
(here 8 instead of 128 to keep it small). The indexer's top-k is set above the entry count,
so its mask is the plain causal rule and can be compared with our inclusive visibility.
"""

import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM  # noqa: E402
from transformers.models.deepseek_v4.modeling_deepseek_v4 import apply_rotary_pos_emb  # noqa: E402

from phasescope.kv import CompressionConfig, rope_positions  # noqa: E402
from phasescope.kv.compressor import new_entries  # noqa: E402
from phasescope.kv.poolers import POOLERS  # noqa: E402

HIDDEN, HEAD_DIM, T = 32, 16, 37


def tiny_v4() -> DeepseekV4ForCausalLM:
    cfg = DeepseekV4Config(
        vocab_size=64,
        hidden_size=HIDDEN,
        moe_intermediate_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=HEAD_DIM,
        q_lora_rank=16,
        n_routed_experts=4,
        num_experts_per_tok=2,
        mlp_layer_types=["moe", "moe"],
        layer_types=["compressed_sparse_attention", "heavily_compressed_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        sliding_window=8,
        o_groups=1,
        o_lora_rank=16,
        index_n_heads=2,
        index_head_dim=8,
        index_topk=64,
        hc_mult=2,
        partial_rotary_factor=0.5,
    )
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(cfg).eval()
    with torch.no_grad():  # HF initialises position_bias to zero; make it matter
        for p in model.parameters():
            if p.dim() == 2 and p.shape[0] in (4, 8):
                p.copy_(torch.randn_like(p))
    return model


def our_pooler_from(hf_comp, step: int, window: int):
    cfg = CompressionConfig(step=step, window=window, pooler="channel_gate")
    pooler = POOLERS["channel_gate"](cfg, HIDDEN, 1, HEAD_DIM)
    with torch.no_grad():
        pooler.wkv.weight.copy_(hf_comp.kv_proj.weight)  # rows: [series, head, dim], series 0 = oldest block
        pooler.wgate.weight.copy_(hf_comp.gate_proj.weight)
        for slot in range(window):
            series = slot // step
            pooler.position_bias[slot, 0] = hf_comp.position_bias[
                slot % step, series * HEAD_DIM : (series + 1) * HEAD_DIM
            ]
        pooler.norm_weight.copy_(hf_comp.kv_norm.weight)
    return cfg, pooler


@pytest.mark.parametrize("layer, step, window", [(0, 4, 8), (1, 8, 8)], ids=["CSA", "HCA"])
def test_channel_gate_reproduces_deepseek_v4_entries_and_visibility(layer, step, window):
    model = tiny_v4()
    hf_comp = model.model.layers[layer].self_attn.compressor
    assert hf_comp.compress_rate == step
    x = torch.randn(2, T, HIDDEN)
    positions = torch.arange(T)[None].expand(2, -1)
    with torch.no_grad():
        hf_entries, hf_bias = hf_comp(x, torch.randn(2, T, 16), positions, None, layer)

        cfg, pooler = our_pooler_from(hf_comp, step, window)
        ends, k, v = new_entries(pooler, cfg, pooler.features(x, None, None), 0, 0)
        cos, sin = hf_comp.rotary_emb(
            k[:, 0], position_ids=rope_positions(cfg, ends).expand(2, -1), layer_type="compress"
        )
        ours = apply_rotary_pos_emb(k, cos, sin)

    assert ours.shape == hf_entries.shape == (2, 1, T // step, HEAD_DIM)
    torch.testing.assert_close(ours, hf_entries, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(v, k)  # shared KV, as in V4
    our_visible = ends[0][None, :] <= torch.arange(T)[:, None]  # inclusive rule
    assert torch.equal(hf_bias[0, 0] == 0, our_visible)


def test_tiny_deepseek_v4_runs_on_cpu():
    logits = tiny_v4()(torch.randint(0, 64, (1, 20))).logits
    assert logits.shape == (1, 20, 64) and torch.isfinite(logits).all()
