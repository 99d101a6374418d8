"""Learned position preferences (phasescope.inspect.preferences): planted preferences are found."""

import json

import pytest
import torch

from phasescope.errors import InputError
from phasescope.inspect.preferences import (
    compare_with_run,
    effective_preferences,
    learned_preferences,
    model_preferences,
    record_slot_weights,
    slot_phase,
)
from phasescope.kv.config import CompressionConfig
from phasescope.model.config import ModelConfig
from phasescope.model.decoder import Decoder

VOCAB, T = 40, 48


def tiny(pooler: str, step: int = 4, window: int = 4, n_kv_heads: int = 2, stagger: bool = False) -> Decoder:
    torch.manual_seed(0)
    scheme = CompressionConfig(step=step, window=window, local=4, pooler=pooler, stagger=stagger)
    cfg = ModelConfig(VOCAB, d_model=32, n_heads=2, n_kv_heads=n_kv_heads, head_dim=8, d_ff=64, layers=(scheme,) * 2)
    return Decoder(cfg).eval()


def ids(rows: int = 6) -> torch.Tensor:
    return torch.randint(0, VOCAB, (rows, T), generator=torch.Generator().manual_seed(1))


def test_slot_phase_maps_slots_to_phases():
    assert [slot_phase(k, 4, 4) for k in range(4)] == [0, 1, 2, 3]
    assert [slot_phase(k, 4, 8) for k in range(8)] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert [slot_phase(k, 4, 6) for k in range(6)] == [2, 3, 0, 1, 2, 3]  # last slot: boundary phase


@pytest.mark.parametrize("stagger", [False, True])
def test_planted_scalar_gate_slot_dominates(stagger):
    model = tiny("scalar_gate", stagger=stagger)
    planted = {0: (2, 0), 1: (1, 3)}  # layer -> (slot of head 0, slot of head 1)
    with torch.no_grad():
        for layer, slots in planted.items():
            logits = model.blocks[layer].attn.pooler.offset_logits
            logits.zero_()
            for head, slot in enumerate(slots):
                logits[head, slot] = 12.0
    eff = effective_preferences(model, ids(), n_resamples=50)
    for layer, slots in planted.items():
        for head, slot in enumerate(slots):
            weights = eff[layer]["mean"][head]
            assert weights[slot] > 0.99 and max(weights) == weights[slot]
        learned = learned_preferences(model.blocks[layer].attn.pooler)
        assert learned[0][slots[0]] > 0.99


def test_planted_channel_gate_bias_slot_dominates():
    model = tiny("channel_gate", step=2, window=4)
    with torch.no_grad():
        for block in model.blocks:
            bias = block.attn.pooler.position_bias  # [w, Hk, D]
            bias.zero_()
            bias[3] = 30.0  # slot 3 (boundary phase) for every head and channel
    eff = effective_preferences(model, ids(), n_resamples=50)
    for layer in (0, 1):
        for head in range(2):
            assert eff[layer]["mean"][head][3] > 0.95
    learned = learned_preferences(model.blocks[0].attn.pooler)
    assert learned[1] == pytest.approx([0.0, 0.0, 0.0, 30.0])


def test_mean_pooler_is_uniform_and_mlp_not_estimable():
    eff = effective_preferences(tiny("mean", step=4, window=8), ids(), n_resamples=50)
    for layer in (0, 1):
        for head in range(2):
            assert eff[layer]["mean"][head] == pytest.approx([1 / 8] * 8)
            assert eff[layer]["std"][head] == pytest.approx([0.0] * 8, abs=1e-12)
    prefs = model_preferences(tiny("mlp"), ids(3))
    assert all(layer["effective"] is None for layer in prefs["layers"])
    assert len(prefs["layers"][0]["learned"]) == 2  # ||pos_k|| per slot, one list per head
    json.dumps(prefs)


def test_hooks_removed_after_an_exception():
    model = tiny("scalar_gate")
    x = ids(2)
    with torch.no_grad():
        before = model(x)
        with pytest.raises(RuntimeError, match="boom"), record_slot_weights(model) as rec:
            model(x)
            assert rec.rows
            raise RuntimeError("boom")
        assert all(not block.attn._forward_hooks for block in model.blocks)
        assert torch.equal(model(x), before)
        assert rec.rows[0][0].shape[0] == 2  # nothing recorded after the context closed


def test_compare_with_run_is_descriptive():
    prefs = model_preferences(tiny("scalar_gate", n_kv_heads=1), ids(2))
    accuracy = {0: 0.5, 1: 0.6, 2: 0.7}  # phase 3: no records
    out = compare_with_run(prefs, accuracy, 4)
    assert out["phases"] == [0, 1, 2]
    assert out["rho"] is None  # zero-init gate: constant weights have no rank correlation
    assert "not estimable" in out["note"]
    with pytest.raises(InputError, match=r"counted mod 8, but the model compresses every \[4\]"):
        compare_with_run(prefs, accuracy, 8)  # a step-8 run's phases are not this model's


def test_cli_on_the_shipped_tiny_s4(tmp_path):
    from importlib.resources import files

    from typer.testing import CliRunner

    from phasescope.cli import app

    model = str(files("phasescope") / "assets" / "demo" / "tiny-s4")
    run = tmp_path / "run"
    run.mkdir()
    phases = [{"phase": p, "accuracy": a} for p, a in enumerate([0.6, 0.63, 0.68, 0.59])]
    (run / "metrics.json").write_text(json.dumps({"phases": phases}))
    args = ["preferences", "--model", model, "--out", str(tmp_path), "--run", str(run), "--rows", "4"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "layer 1 (scalar_gate" in result.output and "descriptive only" in result.output
    saved = json.loads((tmp_path / "preferences.json").read_text())
    assert len(saved["layers"]) == 2 and saved["run_comparison"]["rho"] is not None
    assert (tmp_path / "preferences.png").stat().st_size > 0
    moved = CliRunner().invoke(app, [*args[:3], "--dtype", "bfloat16"], env={"COLUMNS": "200"})
    assert moved.exit_code == 2 and "--dtype bfloat16: preferences reads the slot weights in float32" in moved.output
    served = CliRunner().invoke(app, [*args[:3], "--concurrency", "4"], env={"COLUMNS": "200"})
    assert served.exit_code == 2 and "--concurrency: not an option of phasescope model directories" in served.output
