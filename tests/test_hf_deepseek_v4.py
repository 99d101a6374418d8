"""Our engine vs transformers' DeepseekV4 on the same weights: compressed entries, visibility,
and the whole attention output of one CSA layer.

A tiny DeepseekV4Config (no downloads). CSA: s=4, w=2s=8 (two kv/gate series); HCA: s=w
(here 8 instead of 128 to keep it small). The indexer's top-k is set above the entry count,
so its mask is the plain causal rule and can be compared with our inclusive visibility.
"""

import pytest
import torch
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.masking_utils import create_sliding_window_causal_mask
from transformers.models.deepseek_v4.modeling_deepseek_v4 import apply_rotary_pos_emb

from phasescope.kv import CompressionConfig, rope_positions
from phasescope.kv.compressor import new_entries
from phasescope.kv.poolers import POOLERS
from phasescope.model import ModelConfig
from phasescope.model.decoder import Attention

HIDDEN, HEAD_DIM, N_HEADS, SLIDING, T = 32, 16, 2, 8, 37


def tiny_v4(**overrides) -> DeepseekV4ForCausalLM:
    """``overrides``: DeepseekV4Config fields replacing the tiny defaults."""
    defaults = dict(
        vocab_size=64,
        hidden_size=HIDDEN,
        moe_intermediate_size=16,
        num_hidden_layers=2,
        num_attention_heads=N_HEADS,
        num_key_value_heads=1,
        head_dim=HEAD_DIM,
        q_lora_rank=16,
        n_routed_experts=4,
        num_experts_per_tok=2,
        mlp_layer_types=["moe", "moe"],
        layer_types=["compressed_sparse_attention", "heavily_compressed_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        sliding_window=SLIDING,
        o_groups=2,
        o_lora_rank=16,
        index_n_heads=2,
        index_head_dim=8,
        index_topk=64,
        hc_mult=2,
        partial_rotary_factor=0.5,
    )
    torch.manual_seed(0)
    model = DeepseekV4ForCausalLM(DeepseekV4Config(**(defaults | overrides))).eval()
    with torch.no_grad():  # HF initialises position_bias, sinks and norm scales neutrally; make them matter
        for name, p in model.named_parameters():
            if name.endswith(("position_bias", "sinks")):
                p.copy_(torch.randn_like(p))
            elif "norm" in name and p.dim() == 1:
                p.copy_(1 + 0.3 * torch.randn_like(p))
    return model


def copy_compressor_weights(pooler, hf_comp, step: int, window: int) -> None:
    """Load transformers' compressor weights into our channel_gate pooler (one KV head)."""
    with torch.no_grad():
        pooler.wkv.weight.copy_(hf_comp.kv_proj.weight)  # rows: [series, head, dim], series 0 = oldest block
        pooler.wgate.weight.copy_(hf_comp.gate_proj.weight)
        for slot in range(window):
            series = slot // step
            pooler.position_bias[slot, 0] = hf_comp.position_bias[
                slot % step, series * HEAD_DIM : (series + 1) * HEAD_DIM
            ]
        pooler.norm_weight.copy_(hf_comp.kv_norm.weight)


def our_pooler_from(hf_comp, step: int, window: int):
    cfg = CompressionConfig(step=step, window=window, pooler="channel_gate")
    pooler = POOLERS["channel_gate"](cfg, HIDDEN, 1, HEAD_DIM)
    copy_compressor_weights(pooler, hf_comp, step, window)
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
        ends, k, _ = new_entries(pooler, cfg, pooler.features(x, None, None), 0, 0)
        cos, sin = hf_comp.rotary_emb(
            k[:, 0], position_ids=rope_positions(cfg, ends).expand(2, -1), layer_type="compress"
        )
        ours = apply_rotary_pos_emb(k, cos, sin)

    assert ours.shape == hf_entries.shape == (2, 1, T // step, HEAD_DIM)
    torch.testing.assert_close(ours, hf_entries, rtol=1e-5, atol=1e-5)
    our_visible = ends[0][None, :] <= torch.arange(T)[:, None]  # inclusive rule
    assert torch.equal(hf_bias[0, 0] == 0, our_visible)


def csa_attention_outputs(value_rope: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """One V4 CSA layer's attention output [B,T,C]: (transformers' module, ours in between).

    Both start from transformers' q / kv projections and norms and end with its grouped output
    projection; in between ours pools the entries (channel_gate), applies visibility, the joint
    softmax with sink over raw window + entries, the value path and the de-rotation, with
    transformers' partial, interleaved rope plugged into ``Attention.attend``.
    """
    model = tiny_v4()
    hf = model.model.layers[0].self_attn
    rotary = model.model.rotary_emb
    assert hf.layer_type == "compressed_sparse_attention" and hf.compressor.indexer.index_topk > T // 4
    x = torch.randn(2, T, HIDDEN, generator=torch.Generator().manual_seed(1))
    position_ids = torch.arange(T)[None].expand(2, -1)

    def hf_rope(t: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        cos, sin = rotary(t, position_ids=positions, layer_type="compress")  # [*positions.shape, rope_dim/2]
        return apply_rotary_pos_emb(t, cos, sin, unsqueeze_dim=0)

    scheme = CompressionConfig(step=4, window=8, local=SLIDING, pooler="channel_gate", sink=True, value_rope=value_rope)
    cfg = ModelConfig(vocab_size=64, d_model=HIDDEN, n_heads=N_HEADS, n_kv_heads=1, head_dim=HEAD_DIM, layers=(scheme,))
    ours = Attention(cfg, scheme).eval()
    copy_compressor_weights(ours.pooler, hf.compressor, 4, 8)
    with torch.no_grad():
        ours.sink.copy_(hf.sinks)
        for proj in (hf.o_a_proj, hf.o_b_proj):  # unit-scale outputs, so 1e-5 is a tight tolerance
            proj.weight.normal_(std=proj.weight.shape[1] ** -0.5)

        mask = create_sliding_window_causal_mask(
            config=model.config, inputs_embeds=x, attention_mask=None, cache=None, position_ids=position_ids
        )
        embeddings = {kind: rotary(x, position_ids=position_ids, layer_type=kind) for kind in ("main", "compress")}
        expected, _ = hf(x, embeddings, position_ids, mask, cache=None)

        q = hf.q_b_norm(hf.q_b_proj(hf.q_a_norm(hf.q_a_proj(x))).view(2, T, N_HEADS, HEAD_DIM).transpose(1, 2))
        kv = hf.kv_norm(hf.kv_proj(x)).view(2, T, 1, HEAD_DIM).transpose(1, 2)  # one tensor: key and value
        out = ours.attend(q, kv, kv, ours.pooler.features(x, None, None), 0, None, hf_rope)  # [B,H,T,D]
        grouped = out.transpose(1, 2).reshape(2, T, model.config.o_groups, -1)
        actual = hf.o_b_proj(hf.o_a_proj(grouped).flatten(2))
    return expected, actual


def test_csa_attention_output_matches_transformers_deepseek_v4():
    expected, actual = csa_attention_outputs(value_rope=True)
    assert expected.shape == actual.shape == (2, T, HIDDEN)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_csa_attention_output_parity_sees_the_value_path():
    """Without the V4 value path the same comparison is far off: the test above checks it."""
    expected, actual = csa_attention_outputs(value_rope=False)
    assert (actual - expected).abs().max() > 0.1  # measured: about 1.5 (outputs up to about 2)


def test_tiny_deepseek_v4_runs_on_cpu():
    logits = tiny_v4()(torch.randint(0, 64, (1, 20))).logits
    assert logits.shape == (1, 20, 64) and torch.isfinite(logits).all()
