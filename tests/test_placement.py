"""Probes put the needle where compression acts (beyond the raw window + one compression
window), and key-value variants separate same-window from split-window at equal value phase."""

import numpy as np
import pytest
import torch

import phasescope
from phasescope.backends import from_callable
from phasescope.probes import KVRetrievalProbe, KVRetrievalSpec, ProbeError
from phasescope.probes.base import check_needle_placement
from phasescope.run.orchestrator import same_window
from test_sweep import TASK, planted_model

OFFSETS = list(range(24))


def test_a_model_whose_raw_window_covers_the_needle_is_refused():
    """The probe moves the needle back as far as the task allows; beyond that it refuses, and
    the sweep re-checks every item (a probe that did not plan is caught too)."""
    wide = from_callable(planted_model().logits, vocab_size=TASK.vocab_size, step=4, local=100)
    with pytest.raises(ProbeError, match=r"raw window \+ one compression window \(104 tokens before the question"):
        phasescope.sweep(wide, task=TASK, samples=1)
    unplanned = KVRetrievalProbe(TASK).items(OFFSETS, 1, np.random.default_rng(0))  # min_gap 0: middle of the row
    with pytest.raises(ProbeError, match=r"inside the model's raw window \(L = 64\)"):
        check_needle_placement(unplanned, local=64, window=4)
    check_needle_placement(unplanned, local=8, window=4)  # the demo models' geometry: fine
    moved = phasescope.sweep(from_callable(planted_model().logits, TASK.vocab_size, 4, local=64), task=TASK, samples=1)
    assert min(r.answer_pos - 1 - r.value_pos for r in moved.records) >= 64 + 4


@pytest.mark.parametrize("design", ["shift-needle", "pad-prefix"])
@pytest.mark.parametrize("depth", [0.0, 0.5, 1.0])
def test_native_needle_ends_beyond_raw_window_at_every_offset_and_depth(design, depth):
    min_gap = 12  # L = 8 + one window of 4
    probe = KVRetrievalProbe(TASK, KVRetrievalSpec(design=design, depth=depth, kv_gaps=(0, 2)), min_gap=min_gap)
    items = probe.items(OFFSETS, 3, np.random.default_rng(1))
    assert min(it.answer_pos - 1 - it.value_last for it in items) >= min_gap
    assert min(it.answer_pos - 1 - it.value_last for it in items if it.variant == 0) <= min_gap + 4 or depth < 1


def test_gap_variants_keep_the_value_phase_and_move_the_key():
    probe = KVRetrievalProbe(TASK, KVRetrievalSpec(kv_gaps=(0, 1)), min_gap=12)
    items = probe.items(OFFSETS, 2, np.random.default_rng(2))
    by_key = {(it.content_id, it.offset, it.variant): it for it in items}
    for (c, d, v), it in by_key.items():
        if v == 1:
            ref = by_key[(c, d, 0)]
            assert it.value_pos == ref.value_pos and it.key_pos == ref.key_pos - 1
            assert it.input_ids[it.value_pos] == ref.input_ids[ref.value_pos] == it.candidates["right"][0]
            assert it.input_ids[it.key_pos] == ref.input_ids[ref.key_pos]
    flags = {(it.variant, it.value_pos % 4): same_window(it.key_pos, it.value_last, 4, 4, 0) for it in items}
    assert flags[(0, 1)] and not flags[(1, 1)], "at value phase 1 only the gapped variant straddles a boundary"


class WindowSensitive:
    """A planted model for kv-retrieval: it answers right unless the needle's key and value sit
    in different 4-token windows (``split``) or, with ``phase_only``, unless the value is at
    phase 0. It finds the needle as the last haystack occurrence of the queried key and the
    value as the first value token after it."""

    def __init__(self, phase_only: bool):
        self.phase_only = phase_only

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        logits = torch.zeros(*ids.shape, TASK.vocab_size)
        values = set(TASK.value_ids.tolist())
        for b, row in enumerate(ids.tolist()):
            end = len(row) - 1
            while row[end] == 0:
                end -= 1
            key_pos = max(p for p in range(1, end - 1) if row[p] == row[end])
            value_pos = next(p for p in range(key_pos + 1, end) if row[p] in values)
            wrong = value_pos % 4 == 0 if self.phase_only else key_pos // 4 != value_pos // 4
            other = TASK.value_ids[0] if row[value_pos] != TASK.value_ids[0] else TASK.value_ids[1]
            logits[b, end, other if wrong else row[value_pos]] = 10.0
        return logits


@pytest.mark.parametrize("phase_only", [True, False], ids=["phase-effect", "window-effect"])
def test_same_window_contrast_tells_a_window_effect_from_a_phase_effect(tmp_path, phase_only):
    model = from_callable(WindowSensitive(phase_only), vocab_size=TASK.vocab_size, step=4, window=4, local=8)
    phasescope.sweep(model, task=TASK, samples=12, out=tmp_path, kv_gaps=(0, 1), design="pad-prefix")
    windows = phasescope.analyze(tmp_path, n_resamples=200).windows
    assert windows["separable"] and windows["discordant_phases"] == [1]
    if phase_only:  # pooled same-vs-split would differ by ~50 pp here; at equal value phase there is nothing
        assert abs(windows["same_minus_split_pp"]) < 1e-9 and windows["p_value"] > 0.5
    else:
        assert windows["same_minus_split_pp"] == pytest.approx(100, abs=1e-6) and windows["p_value"] < 0.01


def test_one_rendering_cannot_separate_window_from_phase(tmp_path):
    phasescope.sweep(planted_model(), task=TASK, samples=2, out=tmp_path)
    windows = phasescope.analyze(tmp_path, n_resamples=100).windows
    assert not windows["separable"] and "--kv-gaps 0,1" in windows["note"]


def test_text_probe_needle_is_beyond_the_raw_window_of_a_tiny_deepseek_v4(tmp_path):
    """transformers' DeepseekV4ForCausalLM with sliding_window = 128: the geometry (s = 4,
    w = 8, L = 128) is read from its config and the text probe grows its haystack so the
    needle ends >= 136 tokens before the question at every offset."""
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    from hf_models import save, word_tokenizer

    tok = word_tokenizer()
    cfg = DeepseekV4Config(
        vocab_size=len(tok),
        hidden_size=32,
        moe_intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=16,
        q_lora_rank=16,
        n_routed_experts=2,
        num_experts_per_tok=1,
        mlp_layer_types=["moe"],
        layer_types=["compressed_sparse_attention"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        sliding_window=128,
        o_groups=1,
        o_lora_rank=16,
        index_n_heads=2,
        index_head_dim=8,
        index_topk=512,
        hc_mult=1,
        partial_rotary_factor=0.5,
    )
    torch.manual_seed(0)
    save(DeepseekV4ForCausalLM(cfg), tmp_path / "v4", tok)
    result = phasescope.sweep(f"hf:{tmp_path / 'v4'}", samples=1, out=tmp_path / "run", batch_size=24)
    gaps = [r.answer_pos - 1 - r.value_pos for r in result.records]
    assert min(gaps) >= 128 + 8 and len(result.records) == 24
    spec = (tmp_path / "run" / "spec.json").read_text()
    assert '"local": 128' in spec and '"window": 8' in spec
