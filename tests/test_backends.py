"""Backends: the registry, hf: on a plain causal LM (geometry from options, dtype, batching that
never shifts positions, no silent truncation), and in-memory transformers models."""

import json

import pytest
from typer.testing import CliRunner

import phasescope
from phasescope.backends import BACKENDS, kind, load_spec
from phasescope.backends.hf import Options as HFOptions
from phasescope.cli import app
from phasescope.errors import InputError
from phasescope.probes import ProbeError


def test_registry_lists_every_backend_and_refuses_unknown_prefixes():
    result = CliRunner().invoke(app, ["backends"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for name in BACKENDS:
        assert name in result.output and kind(name).EXAMPLE in result.output
    with pytest.raises(InputError, match="unknown prefix 'vllm:'"):
        load_spec("vllm:http://localhost:8000")
    with pytest.raises(InputError, match="does not exist"):
        load_spec("runs/no-such-model")


def test_a_plain_causal_lm_needs_its_geometry_from_options_and_records_it(qwen3_dir, tmp_path):
    with pytest.raises(InputError, match="declares no compression geometry"):
        phasescope.sweep(f"hf:{qwen3_dir}", samples=1)
    phasescope.sweep(f"hf:{qwen3_dir}", step=4, window=8, local=16, samples=1, out=tmp_path / "r")
    spec = json.loads((tmp_path / "r" / "spec.json").read_text())
    assert (spec["step"], spec["window"], spec["local"], spec["probe"]["min_gap"]) == (4, 8, 16, 24)


def test_batched_scoring_equals_one_sequence_at_a_time(qwen3_dir):
    """Right padding never shifts positions: the same records batched 24 at a time and alone."""
    batched = phasescope.sweep(f"hf:{qwen3_dir}", step=4, samples=2, batch_size=24).records
    alone = phasescope.sweep(f"hf:{qwen3_dir}", step=4, samples=2, batch_size=1).records
    assert len(batched) == len(alone) == 48
    for a, b in zip(batched, alone, strict=True):
        assert a.correct == b.correct
        for name, value in a.logprobs.items():
            assert value == pytest.approx(b.logprobs[name], abs=1e-5)


def test_a_prompt_longer_than_the_model_accepts_is_refused_not_truncated(tmp_path):
    from hf_models import tiny_qwen3, word_tokenizer

    short = tiny_qwen3(tmp_path / "short", word_tokenizer(), max_position_embeddings=64)
    with pytest.raises(ProbeError, match="accepts at most 64"):
        phasescope.sweep(f"hf:{short}", step=4, samples=1)


def test_dtype_and_an_in_memory_transformers_model(qwen3_dir):
    from transformers import AutoModelForCausalLM

    half = phasescope.sweep(f"hf:{qwen3_dir}", step=4, samples=1, options=HFOptions(dtype="bfloat16"))
    full = phasescope.sweep(f"hf:{qwen3_dir}", step=4, samples=1)
    assert all(abs(a.logprob_target - b.logprob_target) < 0.1 for a, b in zip(half.records, full.records, strict=True))
    with pytest.raises(InputError, match="--dtype 'float8'"):
        HFOptions(dtype="float8")
    model = AutoModelForCausalLM.from_pretrained(qwen3_dir)
    tokenizer = load_spec(f"hf:{qwen3_dir}").info.tokenizer
    in_memory = phasescope.sweep(model, step=4, samples=1, tokenizer=tokenizer)
    assert [r.logprob_target for r in in_memory.records] == pytest.approx(
        [r.logprob_target for r in full.records], abs=1e-5
    )


def test_chat_template_only_when_asked_and_its_tokens_count_in_every_position(tmp_path):
    from hf_models import tiny_qwen3, word_tokenizer

    tok = word_tokenizer()
    tok.chat_template = (
        "{% for m in messages %}<user>{{ m['content'] }}</user>{% endfor %}"
        "{% if add_generation_prompt %}<bot>{% endif %}"
    )
    model = tiny_qwen3(tmp_path / "m", tok)
    plain = phasescope.sweep(f"hf:{model}", step=4, samples=1, same_phase=False).records
    chat = phasescope.sweep(f"hf:{model}", step=4, samples=1, chat_template=True, same_phase=False).records
    prefix = len(tok.encode("<user>", add_special_tokens=False))
    bos = 1  # the plain prompt starts with the tokenizer's BOS; the template replaces it
    for a, b in zip(plain, chat, strict=True):
        assert b.anchor_pos == a.anchor_pos - bos + prefix and b.key_pos == a.key_pos - bos + prefix
        assert b.phase == (b.anchor_pos - b.align) % 4
    # --same-phase (the default) counts the template's tokens: offset d is phase d mod 4 in the chat prompt too
    aligned = phasescope.sweep(f"hf:{model}", step=4, samples=2, chat_template=True).records
    assert all(r.phase == r.offset % 4 for r in aligned)
    with pytest.raises(ProbeError, match="no chat template"):
        phasescope.sweep(f"hf:{model}", step=4, samples=1, chat_template=True, tokenizer=word_tokenizer())


def _items_with_multi_token_candidates(vocab: int, n: int = 6) -> list:
    """Prompts of different lengths, each with candidates of 1 to 4 tokens (the numbers and codes
    pair formats, lm-eval continuations)."""
    import numpy as np

    from phasescope.probes.base import ProbeItem

    rng = np.random.default_rng(0)
    items = []
    for i in range(n):
        prompt = [int(t) for t in rng.integers(3, vocab, size=40 + 3 * i)]
        candidates = {f"c{k}": [int(t) for t in rng.integers(3, vocab, size=1 + k)] for k in range(4)}
        items.append(ProbeItem(i, 0, prompt, candidates, "c2", len(prompt), len(prompt), rule="choice"))
    return items


@pytest.mark.parametrize("kind", ["native", "hf"])
def test_logits_only_where_read_equal_every_position_sliced(kind, qwen3_dir):
    """Multi-token candidates are scored from the output head at the positions read only: the
    same results as slicing every position's logits, with K (positions kept) a few, not T."""
    from phasescope.backends.scoring import full_logits, score_items
    from phasescope.demo import ASSETS

    backend = load_spec(str(ASSETS / "tiny-s4") if kind == "native" else f"hf:{qwen3_dir}")
    items = _items_with_multi_token_candidates(backend.info.vocab_size)
    widths = []

    def spy(ids, keep):
        widths.append((ids.shape[1], len(keep)))
        return backend.logits_where(ids, keep)

    kept = score_items(spy, items)
    every = score_items(full_logits(backend.logits), items)
    for a, b in zip(kept, every, strict=True):
        assert a["greedy"] == b["greedy"] and a["logprobs"] == pytest.approx(b["logprobs"], abs=1e-4)
    [(width, positions)] = widths
    assert positions == len({it.answer_pos - 1 + k for it in items for k in range(4)}) < width
