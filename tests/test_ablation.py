"""Head interventions: hooks that remove a head's output, and the specialization statistics."""

import numpy as np
import pytest
import torch

from phasescope.analysis.heads import head_statistics, holm
from phasescope.errors import InputError
from phasescope.inspect.ablation import ablation_matrix
from phasescope.inspect.heads import ablate_heads, head_sites, record_means
from phasescope.kv import scheme
from phasescope.model import Decoder, preset
from planted_heads import PlantedHeads
from test_hf_deepseek_v4 import tiny_v4
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


def test_mean_ablation_replaces_the_slice_with_its_recorded_mean(model):
    x, layer, head = ids(), 0, 2
    with torch.no_grad(), record_means(model) as means:
        model(ids(4, 40, seed=3))
    attn = model.blocks[layer].attn
    assert means[layer].shape == (attn.n_heads, attn.head_dim)
    seen = {}
    with torch.no_grad(), ablate_heads(model, [(layer, head)], mode="mean", means=means):
        # registered after the ablation's hook, so it sees what o_proj receives
        hook = attn.o_proj.register_forward_pre_hook(lambda _m, args: seen.setdefault("x", args[0].clone()))
        try:
            model(x)
        finally:
            hook.remove()
    d = attn.head_dim
    assert torch.allclose(seen["x"][..., head * d : (head + 1) * d], means[layer][head].expand(2, 40, d))
    assert all(not b.attn.o_proj._forward_pre_hooks for b in model.blocks)


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
    with pytest.raises(InputError, match="record_means"), ablate_heads(model, [(0, 0)], mode="mean"):
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
    result = ablation_matrix(model, task=TASK, offsets=range(8), samples=3, layers=[0], n_permutations=50)
    n_heads = model.blocks[0].attn.n_heads
    assert [(r["layer"], r["head"]) for r in result["heads"]] == [(0, h) for h in range(n_heads)]
    row = result["heads"][0]
    assert len(row["accuracy"]["change_by_phase"]) == result["step"] == 4
    assert row["logprob"]["p_holm"] is None or 0 < row["logprob"]["p_holm"] <= 1
    # an untrained model's log-probs move when a head is removed
    assert any(any(c["mean"] != 0 for c in r["logprob"]["change_by_phase"]) for r in result["heads"])
    assert all(not b.attn.o_proj._forward_pre_hooks for b in model.blocks)


def test_ablation_matrix_mean_mode_and_bad_layer(model):
    result = ablation_matrix(model, task=TASK, samples=2, layers=[1], mode="mean", n_permutations=20)
    assert result["mode"] == "mean" and {r["layer"] for r in result["heads"]} == {1}
    with pytest.raises(InputError, match="layer 7"):
        ablation_matrix(model, task=TASK, samples=2, layers=[7])
    with pytest.raises(InputError, match="top_k"):
        ablation_matrix(model, task=TASK, samples=2, layers=[1], top_k=4)
    with pytest.raises(InputError, match="samples >= 2"):
        ablation_matrix(model, task=TASK, samples=1, mode="resample")


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
    assert [c["phase"] for c in saved["causal"]] == [0, 1, 2, 3] and saved["top_k"] == 1
    assert "held-out contrast" in result.output
    assert "tests on 5 contents: its intervals are wide" in result.output  # 10 samples: 5 choose, 5 test
    for c in saved["causal"]:  # a contrast of two accuracy drops lies in [-2, 2], and so does its interval
        assert c["ci_low"] is None or -2 <= c["ci_low"] <= c["ci_high"] <= 2
    for r in saved["heads"]:
        assert all(-1 <= c["ci_low"] <= c["ci_high"] <= 1 for c in r["accuracy"]["change_by_phase"] if c["ci_low"])
    bad = runner.invoke(app, [*args, "--mode", "shuffle"])
    assert bad.exit_code == 2 and "--mode 'shuffle' is invalid" in bad.output


def test_ablate_reads_the_probe_and_model_options_as_sweep_does():
    """One parser (#45): every probe's and backend's option is an ablate option, read by the sweep's
    rules: another backend's option or another probe's is refused when typed, even at its default."""
    from typer.testing import CliRunner

    from phasescope.backends import declared_options as backend_declared
    from phasescope.cli import app
    from phasescope.cli.ablate import ABLATE_OPTIONS
    from phasescope.probes import declared_options as probe_declared

    assert set(probe_declared()) | set(backend_declared()) <= set(ABLATE_OPTIONS)
    runner = CliRunner(env={"COLUMNS": "200"})
    args = ["ablate", "--model", "demo:tiny-s4", "--layers", "1", "--samples", "4"]
    served = runner.invoke(app, [*args, "--concurrency", "8"])  # an openai: option, at its default value or not
    assert served.exit_code == 2 and "--concurrency: not an option of phasescope model directories" in served.output
    foreign = runner.invoke(app, [*args, "--probe", "padding-completion", "--depth", "0.5"])
    assert foreign.exit_code == 2 and "--depth: not used by the padding-completion probe" in foreign.output


# --- planted: a model whose heads serve known phases (tests/planted_heads.py) ---

SPECIALIST = [{2}, {0, 1, 3}, {0, 1, 3}, {0, 1, 3}]  # head 0 alone serves phase 2; 1-3 each serve the rest
GENERALIST = [{0, 1, 2, 3}, set(), set(), set()]  # head 0 serves every phase, no head serves a phase


@pytest.mark.parametrize("mode", ["zero", "mean", "resample"])
def test_a_head_hard_wired_to_a_phase_is_found_and_passes_the_held_out_check(mode):
    planted = PlantedHeads(TASK.vocab_size, 4, SPECIALIST)
    result = ablation_matrix(planted, task=TASK, step=4, samples=20, mode=mode, n_permutations=300)
    rows = {r["head"]: r["accuracy"] for r in result["heads"]}
    assert rows[0]["specialized"] and rows[0]["preferred_phase"] == 2 and rows[0]["p_holm"] < 0.05
    assert not any(rows[h]["specialized"] for h in (1, 2, 3))
    assert rows[0]["change_by_phase"][2]["mean"] < -0.5  # phase 2 fails without its head
    assert all(rows[0]["change_by_phase"][p]["mean"] == 0 for p in (0, 1, 3))
    causal = {c["phase"]: c for c in result["causal"]}
    assert causal[2]["heads"] == [[0, 0]] and causal[2]["n_contents"] == 10
    assert causal[2]["ci_low"] > 0.3 and causal[2]["p_holm"] < 0.05  # chosen on one half, holds on the other
    for p in (0, 1, 3):  # no head serves these alone: their top head changes (almost) nothing
        assert abs(causal[p]["contrast"]) < 0.1
    assert not planted.blocks[0].attn.o_proj._forward_pre_hooks


def test_no_head_is_flagged_when_none_serves_a_phase():
    planted = PlantedHeads(TASK.vocab_size, 4, GENERALIST)
    result = ablation_matrix(planted, task=TASK, step=4, samples=20, n_permutations=300)
    rows = {r["head"]: r["accuracy"] for r in result["heads"]}
    assert not any(r["specialized"] for r in rows.values())
    assert all(c["mean"] < -0.4 for c in rows[0]["change_by_phase"])  # head 0 matters, at every phase alike
    assert all(c["ci_low"] is None or c["ci_low"] <= 0.05 for c in result["causal"])


# --- transformers models: Qwen3's o_proj and DeepSeek-V4's grouped o_a_proj ---


def tiny_qwen3_model():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(
        vocab_size=80,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=8,
    )
    return Qwen3ForCausalLM(cfg).eval()


def v4_four_heads():
    return tiny_v4(vocab_size=80, num_attention_heads=4, o_groups=2)  # two heads per output group


def zeroed_weight_copy(hf_model, layer: int, head: int):
    """The same model with head ``head``'s input columns of the output projection zeroed."""
    import copy

    clone = copy.deepcopy(hf_model)
    site = head_sites(clone)[layer]
    d, per_group = site.head_dim, site.n_heads // getattr(site.proj, "n_groups", 1)
    with torch.no_grad():
        if hasattr(site.proj, "n_groups"):  # weight rows: group-major blocks of o_lora_rank outputs
            rows = site.proj.weight.view(site.proj.n_groups, -1, site.proj.in_features)
            g, h = divmod(head, per_group)
            rows[g, :, h * d : (h + 1) * d] = 0
        else:
            site.proj.weight[:, head * d : (head + 1) * d] = 0
    return clone


@pytest.mark.parametrize("build", [tiny_qwen3_model, v4_four_heads], ids=["qwen3", "deepseek-v4"])
@pytest.mark.parametrize("head", [0, 3])
def test_hf_zero_ablation_equals_zeroing_the_heads_projection_columns(build, head):
    hf_model = build()
    x = torch.randint(0, 80, (2, 21), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        before = hf_model(x).logits
        with ablate_heads(hf_model, [(1, head)]):
            hooked = hf_model(x).logits
        expected = zeroed_weight_copy(hf_model, 1, head)(x).logits
        after = hf_model(x).logits
    assert not torch.allclose(before, hooked)
    assert torch.allclose(hooked, expected, atol=1e-5)
    assert torch.equal(before, after)  # hooks gone


def test_hf_resample_takes_the_head_from_the_other_row():
    hf_model = v4_four_heads()
    a, b = (torch.randint(0, 80, (1, 21), generator=torch.Generator().manual_seed(s)) for s in (1, 2))
    with torch.no_grad():
        clean = hf_model(torch.cat([a, b])).logits
        with ablate_heads(hf_model, [(0, 1)], mode="resample"):
            same = hf_model(torch.cat([a, a])).logits  # the donor is identical: nothing changes
            mixed = hf_model(torch.cat([a, b])).logits
        with pytest.raises(RuntimeError, match="boom"), ablate_heads(hf_model, [(0, 1)], mode="resample"):
            raise RuntimeError("boom")
        after = hf_model(torch.cat([a, b])).logits
    assert torch.allclose(same[0], clean[0], atol=1e-5) and not torch.allclose(mixed, clean, atol=1e-3)
    assert torch.equal(after, clean)


def test_ablation_matrix_runs_on_deepseek_v4():
    hf_model = v4_four_heads()
    result = ablation_matrix(hf_model, task=TASK, step=4, samples=4, layers=[0], n_permutations=50)
    assert [(r["layer"], r["head"]) for r in result["heads"]] == [(0, h) for h in range(4)]
    assert any(any(c["mean"] != 0 for c in r["logprob"]["change_by_phase"]) for r in result["heads"])
    assert len(result["causal"]) == 4 and result["causal"][0]["n_contents"] == 2
    assert all(not layer.self_attn.o_a_proj._forward_pre_hooks for layer in hf_model.model.layers)


def test_a_model_without_weights_here_cannot_be_ablated():
    from phasescope.backends import from_callable

    served_like = from_callable(lambda ids: torch.zeros(ids.shape[0], ids.shape[1], TASK.vocab_size), step=4)
    with pytest.raises(InputError, match="weights in this process"):
        ablation_matrix(served_like, task=TASK, samples=2)


def test_a_drift_over_offsets_is_not_read_as_phase_specialization():
    """A head whose removal hurts far needles more (a linear drift over offsets, no phase effect):
    without removing the drift the late phases look preferred (37.5% false positives measured);
    with it the rate stays near alpha (6-7% in 800 simulations, 100 here)."""
    from phasescope.analysis.heads import specialization

    rng = np.random.default_rng(3)
    n, hits = 10, 0
    offsets = np.tile(np.arange(8), n)
    contents, phases = np.repeat(np.arange(n), 8), offsets % 4
    for _ in range(100):
        diffs = -0.05 * offsets + rng.normal(0, 0.3, n)[contents] + rng.normal(0, 0.3, len(offsets))
        hits += specialization(diffs, phases, contents, 4, rng, 100, offsets)["p_value"] < 0.05
    assert hits <= 15


# --- KV heads: a KV head's compressed entries hidden (inspect/kv_heads.py, issue #23) ---


@pytest.fixture(scope="module")
def kv4_model():
    torch.manual_seed(1)
    cfg = preset("tiny", TASK.vocab_size, scheme("tiny-4", local=8), n_kv_heads=4)
    return Decoder(cfg).eval()


def test_hiding_every_kv_heads_entries_equals_the_raw_window_alone(kv4_model):
    """With all entries hidden, a compressed layer is a sliding window of L raw tokens."""
    from phasescope.inspect.kv_heads import hide_kv_entries

    sliding = Decoder(replace_layers(kv4_model.cfg, scheme("sliding-128", local=8))).eval()
    sliding.load_state_dict(kv4_model.state_dict(), strict=False)  # pooler weights have no place: unused
    x = ids(2, 60)
    with torch.no_grad():
        with hide_kv_entries(kv4_model, [(layer, h) for layer in (0, 1) for h in range(4)]):
            hidden = kv4_model(x)
        expected = sliding(x)
        plain = kv4_model(x)
    torch.testing.assert_close(hidden, expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(plain, expected, atol=1e-3)  # the entries did matter
    assert all(b.attn.entry_selector is None for b in kv4_model.blocks)  # restored


def replace_layers(cfg, layer_scheme):
    from dataclasses import replace

    return replace(cfg, layers=(layer_scheme,) * cfg.n_layers)


def test_hiding_one_kv_head_changes_only_its_query_heads(kv4_model):
    """4 query heads over 4 KV heads: query head h reads KV head h only."""
    from phasescope.inspect.kv_heads import hide_kv_entries

    attn = kv4_model.blocks[0].attn
    seen = []
    hook = attn.o_proj.register_forward_pre_hook(lambda _m, args: seen.append(args[0].clone()))
    x = ids(2, 60)
    try:
        with torch.no_grad():
            kv4_model(x)
            with hide_kv_entries(kv4_model, [(0, 2)]):
                kv4_model(x)
    finally:
        hook.remove()
    d = attn.head_dim
    before, after = (s.view(2, 60, 4, d) for s in seen)
    # the hidden run takes the masked path, the plain one the inference fast path (its parts
    # merged through log-sum-exps): equal up to float32 rounding
    for h in (0, 1, 3):
        torch.testing.assert_close(after[:, :, h], before[:, :, h], rtol=1e-5, atol=1e-6)
    assert (after[:, :, 2] - before[:, :, 2]).abs().max() > 1e-3


def test_kv_entry_hiding_is_undone_after_an_error_and_refuses_bad_input(kv4_model):
    from phasescope.inspect.kv_heads import hide_kv_entries

    with pytest.raises(RuntimeError, match="boom"), hide_kv_entries(kv4_model, [(1, 0)]):
        assert kv4_model.blocks[1].attn.entry_selector is not None
        raise RuntimeError("boom")
    assert all(b.attn.entry_selector is None for b in kv4_model.blocks)
    with pytest.raises(InputError, match="KV head 4 of layer 0"), hide_kv_entries(kv4_model, [(0, 4)]):
        pass
    with pytest.raises(InputError, match="mode='mean' does not apply to component kv-entries"):
        ablation_matrix(kv4_model, task=TASK, samples=2, component="kv-entries", mode="mean")
    with pytest.raises(InputError, match="component='shard' is invalid"):
        ablation_matrix(kv4_model, task=TASK, samples=2, component="shard")
    full = Decoder(preset("tiny", TASK.vocab_size, scheme("full")))
    with pytest.raises(InputError, match="no compressed entries"), hide_kv_entries(full, [(0, 0)]):
        pass


KV_SPECIALIST = [{2}, {0, 1, 3}, {0, 1, 3}, {0, 1, 3}]  # KV head 0 alone serves phase 2


def test_a_kv_head_that_alone_serves_a_phase_is_found_and_passes_the_held_out_check():
    from planted_kv_heads import PlantedKVHeads

    planted = PlantedKVHeads(TASK.vocab_size, 4, KV_SPECIALIST)
    result = ablation_matrix(planted, task=TASK, step=4, samples=20, component="kv-entries", n_permutations=300)
    assert result["component"] == "kv-entries"
    rows = {r["head"]: r["accuracy"] for r in result["heads"]}
    assert rows[0]["specialized"] and rows[0]["preferred_phase"] == 2 and rows[0]["p_holm"] < 0.05
    assert not any(rows[h]["specialized"] for h in (1, 2, 3))
    causal = {c["phase"]: c for c in result["causal"]}
    assert causal[2]["heads"] == [[0, 0]] and causal[2]["ci_low"] > 0.3 and causal[2]["p_holm"] < 0.05
    for p in (0, 1, 3):
        assert abs(causal[p]["contrast"]) < 0.1
    assert planted.blocks[0].attn.entry_selector is None


def test_no_kv_head_is_flagged_when_none_serves_a_phase_alone():
    from planted_kv_heads import PlantedKVHeads

    planted = PlantedKVHeads(TASK.vocab_size, 4, [{0, 1, 2, 3}, set(), set(), set()])
    result = ablation_matrix(planted, task=TASK, step=4, samples=20, component="kv-entries", n_permutations=300)
    rows = {r["head"]: r["accuracy"] for r in result["heads"]}
    assert not any(r["specialized"] for r in rows.values())
    assert all(c["mean"] < -0.4 for c in rows[0]["change_by_phase"])  # KV head 0 matters at every phase alike
    assert all(c["ci_low"] is None or c["ci_low"] <= 0.05 for c in result["causal"])


def test_a_t_interval_over_two_contents_is_clipped_to_the_range_the_change_can_take():
    from phasescope.analysis.heads import ACCURACY_CHANGE, t_summary

    wide = t_summary([-0.9, 0.7])  # t(0.975, 1) = 12.7: about ±10 around the mean
    assert wide["ci_low"] < -5 and wide["ci_high"] > 5
    clipped = t_summary([-0.9, 0.7], ACCURACY_CHANGE)
    assert (clipped["ci_low"], clipped["ci_high"]) == (-1.0, 1.0) and clipped["mean"] == wide["mean"]
    narrow = t_summary([0.1, 0.12, 0.11, 0.1], ACCURACY_CHANGE)
    assert narrow == t_summary([0.1, 0.12, 0.11, 0.1])  # an interval inside the range is unchanged


def test_an_empty_layer_list_and_a_single_kv_head_are_refused_with_what_to_do():
    from pathlib import Path

    from typer.testing import CliRunner

    import phasescope
    from phasescope.cli import app

    model = str(Path(phasescope.__file__).parent / "assets" / "demo" / "tiny-s4")
    runner = CliRunner(env={"COLUMNS": "200"})
    empty = runner.invoke(app, ["ablate", "--model", model, "--layers", "", "--samples", "4"])
    assert empty.exit_code == 2 and "names no layer" in empty.output and "top_k" not in empty.output
    single = runner.invoke(app, ["ablate", "--model", model, "--layers", "1", "--component", "kv-entries"])
    assert single.exit_code == 2 and "1 KV heads to ablate in layers [1]" in single.output
    assert "--component head" in single.output
