"""Head interventions: hooks that remove a head's output, and the specialization statistics."""

import numpy as np
import pytest
import torch

from phasescope.errors import InputError
from phasescope.inspect.ablation import ablate_heads, ablation_matrix, head_means, head_statistics, holm
from phasescope.kv import scheme
from phasescope.model import Decoder, preset
from test_sweep import TASK


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Decoder(preset("tiny", TASK.vocab_size, scheme("tiny-4", local=8))).eval()


def ids(n=2, t=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, TASK.vocab_size, (n, t), generator=g)


def test_ablating_a_whole_layer_changes_outputs(model):
    x = ids()
    with torch.no_grad():
        before = model(x)
        n_heads = model.blocks[0].attn.n_heads
        with ablate_heads(model, [(0, h) for h in range(n_heads)]):
            after = model(x)
    assert not torch.allclose(before, after)


def test_zero_ablation_equals_zeroing_the_o_proj_input_slice(model):
    x, layer, head = ids(), 1, 1
    attn = model.blocks[layer].attn
    d = attn.head_dim
    original = attn.o_proj.forward

    def manual(inp):
        inp = inp.clone()
        inp[..., head * d : (head + 1) * d] = 0
        return original(inp)

    with torch.no_grad():
        with ablate_heads(model, [(layer, head)]):
            hooked = model(x)
        attn.o_proj.forward = manual
        try:
            expected = model(x)
        finally:
            del attn.o_proj.forward
    assert torch.equal(hooked, expected)


def test_mean_ablation_uses_reference_means(model):
    x = ids()
    means = head_means(model, ids(4, 40, seed=3))
    assert means[0].shape == (model.blocks[0].attn.n_heads, model.blocks[0].attn.head_dim)
    with torch.no_grad():
        with ablate_heads(model, [(0, 0)], mode="mean", means=means):
            a = model(x)
        with ablate_heads(model, [(0, 0)], mode="mean", reference_ids=ids(4, 40, seed=3)):
            b = model(x)
        with ablate_heads(model, [(0, 0)]):
            z = model(x)
    assert torch.allclose(a, b) and not torch.allclose(a, z)


def test_hooks_removed_after_an_exception(model):
    x = ids()
    with torch.no_grad():
        before = model(x)
        with pytest.raises(RuntimeError, match="boom"), ablate_heads(model, [(0, 0), (1, 2)]):
            raise RuntimeError("boom")
        after = model(x)
    assert torch.equal(before, after)
    assert all(not b.attn.o_proj._forward_pre_hooks for b in model.blocks)


def test_bad_heads_and_modes_are_refused(model):
    with pytest.raises(InputError, match="layer 9"), ablate_heads(model, [(9, 0)]):
        pass
    with pytest.raises(InputError, match="head 99"), ablate_heads(model, [(0, 99)]):
        pass
    with pytest.raises(InputError, match="mode"), ablate_heads(model, [(0, 0)], mode="shuffle"):
        pass
    with pytest.raises(InputError, match="reference_ids"), ablate_heads(model, [(0, 0)], mode="mean"):
        pass


def synthetic(n_contents=20, offsets=8, step=4, seed=0):
    """Per-record differences: head A hurts phase 2 only, B hurts every phase equally, C nothing."""
    rng = np.random.default_rng(seed)
    contents = np.repeat(np.arange(n_contents), offsets)
    phases = np.tile(np.arange(offsets) % step, n_contents)

    def noise():
        return rng.normal(0, 0.05, len(phases))

    per_head = {
        (0, 0): {"accuracy": np.where(phases == 2, -0.8, 0.0) + noise(), "logprob": np.where(phases == 2, -3.0, 0.0)},
        (0, 1): {"accuracy": np.full(len(phases), -0.5) + noise(), "logprob": np.full(len(phases), -2.0) + noise()},
        (1, 0): {"accuracy": np.zeros(len(phases)), "logprob": noise()},
    }
    return per_head, phases, contents


def test_statistics_flag_the_planted_phase_specialist_only():
    per_head, phases, contents = synthetic()
    rows = {(r["layer"], r["head"]): r for r in head_statistics(per_head, phases, contents, 4, n_permutations=300)}
    a, b, c = rows[(0, 0)], rows[(0, 1)], rows[(1, 0)]
    for metric in ("accuracy", "logprob"):
        assert a[metric]["specialized"] and a[metric]["preferred_phase"] == 2 and a[metric]["p_holm"] < 0.05
        assert not b[metric]["specialized"] and not c[metric]["specialized"]
    assert a["accuracy"]["index"] == pytest.approx(0.8, abs=0.05)
    phase2 = a["accuracy"]["change_by_phase"][2]
    assert phase2["ci_low"] < -0.8 < phase2["ci_high"] and phase2["n_contents"] == 20
    assert c["accuracy"]["index"] == 0 and c["accuracy"]["p_value"] == 1.0


def test_holm():
    adjusted = holm([0.01, 0.04, None, 0.03])
    assert adjusted[2] is None
    assert [adjusted[i] for i in (0, 1, 3)] == pytest.approx([0.03, 0.06, 0.06])


def test_ablation_matrix_end_to_end_on_a_tiny_decoder(model):
    result = ablation_matrix(model, TASK, offsets=range(8), samples=3, layers=[0], n_permutations=50)
    n_heads = model.blocks[0].attn.n_heads
    assert [(r["layer"], r["head"]) for r in result["heads"]] == [(0, h) for h in range(n_heads)]
    row = result["heads"][0]
    assert len(row["accuracy"]["change_by_phase"]) == result["step"] == 4
    assert row["logprob"]["p_holm"] is None or 0 < row["logprob"]["p_holm"] <= 1
    # an untrained model's log-probs move when a head is removed
    assert any(any(c["mean"] != 0 for c in r["logprob"]["change_by_phase"]) for r in result["heads"])
    assert all(not b.attn.o_proj._forward_pre_hooks for b in model.blocks)


def test_ablation_matrix_mean_mode_and_bad_layer(model):
    result = ablation_matrix(model, TASK, offsets=range(8), samples=2, layers=[1], mode="mean", n_permutations=20)
    assert result["mode"] == "mean" and {r["layer"] for r in result["heads"]} == {1}
    with pytest.raises(InputError, match="layer 7"):
        ablation_matrix(model, TASK, offsets=range(8), samples=2, layers=[7])


def test_the_ablate_command_writes_the_matrix_for_a_shipped_model(tmp_path):
    import json
    from pathlib import Path

    from typer.testing import CliRunner

    import phasescope
    from phasescope.cli import app

    model = Path(phasescope.__file__).parent / "assets" / "demo" / "tiny-s4"
    runner = CliRunner(env={"COLUMNS": "200"})
    args = ["ablate", "--model", str(model), "--layers", "1", "--samples", "10", "--permutations", "50"]
    result = runner.invoke(app, [*args, "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "ablation.json").read_text())
    assert [(r["layer"], r["head"]) for r in saved["heads"]] == [(1, h) for h in range(4)]
    assert "layer 1 head 3: specialization index" in result.output
    bad = runner.invoke(app, [*args, "--mode", "resample"])
    assert bad.exit_code == 2 and "--mode 'resample' is invalid" in bad.output
