"""Learned position preferences of transformers' DeepseekV4 compressors (inspect.preferences_v4).

A tiny DeepseekV4Config (no downloads): layer 0 CSA (s=4, window 2s=8 with the Ca/Cb overlap),
layer 1 sliding-only (no compressor: skipped), layer 2 HCA (s=w=8 instead of 128).
"""

import json

import pytest
import torch
from transformers import DeepseekV4ForCausalLM

from phasescope.inspect.preferences import effective_preferences, format_table, model_preferences
from phasescope.inspect.preferences_v4 import compressors, record_v4_slot_weights, slot_weights
from phasescope.train.shipped import DEMO as ASSETS
from test_hf_deepseek_v4 import tiny_v4 as shared_tiny_v4

VOCAB, HIDDEN, HEAD_DIM, T = 64, 32, 16, 40
CSA, HCA = 0, 2


def tiny_v4() -> DeepseekV4ForCausalLM:
    """test_hf_deepseek_v4's tiny model with a sliding-only layer between CSA and HCA."""
    return shared_tiny_v4(
        num_hidden_layers=3,
        mlp_layer_types=["moe"] * 3,
        layer_types=["compressed_sparse_attention", "sliding_attention", "heavily_compressed_attention"],
        sliding_window=8,
    )


def ids(rows: int = 4) -> torch.Tensor:
    return torch.randint(0, VOCAB, (rows, T), generator=torch.Generator().manual_seed(1))


def comp_of(model, layer):
    return model.model.layers[layer].self_attn.compressor


def pooled_by_transformers(module, x: torch.Tensor, call) -> torch.Tensor:
    """What transformers feeds module.kv_norm (the softmax-pooled entries, before norm and rope)."""
    seen = []
    handle = module.kv_norm.register_forward_pre_hook(lambda mod, args: seen.append(args[0]))  # returns None
    try:
        call()
    finally:
        handle.remove()
    return seen[0]


@pytest.mark.parametrize("part", ["csa", "csa-indexer", "hca"])
def test_slot_weights_reproduce_transformers_pooling(part):
    """Our per-slot, per-channel weights times the kv each slot reads = transformers' pooled entry."""
    model = tiny_v4()
    comp = comp_of(model, HCA if part == "hca" else CSA)
    module = comp.indexer if part == "csa-indexer" else comp
    overlap = part != "hca"
    x = torch.randn(2, T, HIDDEN, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = pooled_by_transformers(
            module, x, lambda: comp(x, torch.randn(2, T, 16), torch.arange(T)[None].expand(2, -1), None, 0)
        )
        weights, full = slot_weights(module.gate_proj(x), module.position_bias, module.compress_rate, overlap)
        s, n = module.compress_rate, T // module.compress_rate
        kv = module.kv_proj(x)[:, : n * s].view(2, n, s, -1)
        if overlap:  # the kv each slot reads: Ca of the previous block, then Cb of this one
            d = kv.shape[-1] // 2
            prev = torch.cat([torch.zeros_like(kv[:, :1, :, :d]), kv[:, :-1, :, :d]], dim=1)
            kv = torch.cat([prev, kv[..., d:]], dim=2)
        actual = (weights * kv).sum(dim=2)
    assert weights.shape[2] == (2 * s if overlap else s)
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-6)
    assert full.tolist() == ([False] + [True] * (n - 1) if overlap else [True] * n)
    assert torch.allclose(weights.sum(dim=2), torch.ones(()))


@pytest.mark.parametrize("layer, slot", [(CSA, 2), (CSA, 5), (HCA, 3)], ids=["CSA-Ca", "CSA-Cb", "HCA"])
def test_planted_slot_dominates_and_its_phase_is_the_token_it_pools(layer, slot):
    model = tiny_v4()
    comp = comp_of(model, layer)
    s, d = comp.compress_rate, HEAD_DIM
    with torch.no_grad():
        comp.gate_proj.weight.zero_()  # equal gates: the bias alone decides
        comp.position_bias.zero_()
        if layer == CSA:  # slot k < s: Ca of offset k; k >= s: Cb of offset k - s
            half = slice(0, d) if slot < s else slice(d, 2 * d)
            comp.position_bias[slot % s, half] = 30.0
        else:
            comp.position_bias[slot] = 30.0
    x = ids()
    prefs = model_preferences(model, x)
    entry = next(e for e in prefs["layers"] if e["layer"] == layer)
    weights = entry["effective"]["mean"][0]
    assert weights[slot] > 0.99 and max(weights) == weights[slot]
    assert entry["learned"][0][slot] == pytest.approx(30.0)
    assert entry["learned_weight"][0][slot] > 0.99

    # independent of our slot layout: which token does transformers' pooled entry copy?
    captured = {}
    handle = comp.register_forward_pre_hook(lambda mod, args: captured.update(x=args[0]))
    try:
        with torch.no_grad():
            distinct = torch.randperm(VOCAB, generator=torch.Generator().manual_seed(3))[:T]  # no token twice
            model(input_ids=distinct[None], use_cache=False)
            hidden = captured["x"]
            pooled = pooled_by_transformers(
                comp, hidden, lambda: comp(hidden, hidden[..., :16], torch.arange(T)[None], None, 0)
            )
            kv = comp.kv_proj(hidden)[0]  # [T, C]
    finally:
        handle.remove()
    candidates = kv.view(T, -1, d)  # every token, every series (Ca/Cb, or the one HCA series)
    for j in range(1, T // s):
        dist = (candidates - pooled[0, j]).norm(dim=-1)
        pos, series = divmod(int(dist.argmin()), candidates.shape[1])
        assert float(dist.min()) < 1e-4 and series == (slot // s if layer == CSA else 0)
        assert entry["slot_phase"][slot] == pos % s
        first = (j - 1) * s if layer == CSA else j * s  # the window's oldest token
        assert pos == first + slot


def test_equal_bias_and_zero_gates_pool_uniformly():
    model = tiny_v4()
    with torch.no_grad():
        for _, comp, overlap in compressors(model):
            for module in (comp, comp.indexer) if overlap else (comp,):
                module.gate_proj.weight.zero_()
                module.position_bias.fill_(0.7)
    prefs = model_preferences(model, ids())
    assert [e["layer"] for e in prefs["layers"]] == [CSA, HCA]  # the sliding-only layer is skipped
    csa, hca = prefs["layers"]
    assert (csa["pooler"], csa["window"], csa["slot_phase"]) == ("deepseek_v4_csa", 8, [0, 1, 2, 3] * 2)
    assert (hca["pooler"], hca["window"], hca["slot_phase"]) == ("deepseek_v4_hca", 8, list(range(8)))
    for part in (csa, csa["indexer"], hca):
        assert part["effective"]["mean"][0] == [0.125] * 8  # exactly 1/w: entry 0 (partial) left out
        assert part["effective"]["std"][0] == [0.0] * 8
        assert part["learned_weight"][0] == pytest.approx([0.125] * 8)
    assert "indexer" not in hca
    json.dumps(prefs)
    assert effective_preferences(model, ids(2), n_resamples=10)[CSA]["n_rows"] == 2
    lines = format_table(prefs)
    assert lines[0].startswith("layer 0 (deepseek_v4_csa, s=4 w=8; slot phases 0,1,2,3,0,1,2,3)")
    assert any(line.startswith("  indexer: 0.125±0.000") for line in lines)


def test_hooks_removed_after_an_exception_and_a_cache_is_refused():
    model = tiny_v4()
    x = ids(2)
    with torch.no_grad():
        before = model(input_ids=x, use_cache=False).logits
        with pytest.raises(RuntimeError, match="boom"), record_v4_slot_weights(model) as rec:
            model(input_ids=x, use_cache=False)
            assert sorted(rec.rows) == [CSA, HCA] and sorted(rec.indexer_rows) == [CSA]
            raise RuntimeError("boom")
        assert all(not comp._forward_hooks for _, comp, _ in compressors(model))
        assert torch.equal(model(input_ids=x, use_cache=False).logits, before)
        assert rec.rows[CSA][0].shape == (2, 1, 8)  # nothing recorded after the context closed
        with pytest.raises(ValueError, match="use_cache=False"), record_v4_slot_weights(model):
            model(input_ids=x, use_cache=True)
        assert all(not comp._forward_hooks for _, comp, _ in compressors(model))


def test_cli_on_a_saved_deepseek_v4(tmp_path):
    from typer.testing import CliRunner

    from phasescope.cli import app
    from phasescope.data.retrieval import RetrievalTask

    task = RetrievalTask(
        n_keys=8, n_values=8, n_filler=4, n_pairs=4, n_queries=2, max_gap=1, min_distance=4, seq_len=48
    )
    hf_dir = tmp_path / "hf"
    tiny_v4().save_pretrained(str(hf_dir), safe_serialization=True)
    args = ["preferences", "--model", f"hf:{hf_dir}", "--rows", "3"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code != 0 and "has no phasescope.json" in result.output  # not written yet
    (hf_dir / "phasescope.json").write_text(json.dumps({"compression": {"step": 4}}))
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code != 0 and "has no task" in result.output
    native = CliRunner().invoke(app, ["preferences", "--model", f"hf:{ASSETS / 'tiny-s4'}"], env={"COLUMNS": "300"})
    assert native.exit_code == 2 and "is a phasescope model directory: give it without hf:" in native.output

    (hf_dir / "phasescope.json").write_text(json.dumps({"task": task.to_dict()}))
    run = tmp_path / "run"
    run.mkdir()
    phases = [{"phase": p, "accuracy": a} for p, a in enumerate([0.6, 0.63, 0.68, 0.59])]
    (run / "metrics.json").write_text(json.dumps({"phases": phases}))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, [*args, "--out", str(out), "--run", str(run)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "layer 0 (deepseek_v4_csa" in result.output and "layer 2 (deepseek_v4_hca" in result.output
    assert "layer 1 " not in result.output and "descriptive only" in result.output
    saved = json.loads((out / "preferences.json").read_text())
    assert [e["layer"] for e in saved["layers"]] == [CSA, HCA] and saved["n_rows"] == 3
    assert saved["run_comparison"]["phases"] == [0, 1, 2, 3]
    assert (out / "preferences.png").stat().st_size > 0
