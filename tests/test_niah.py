"""Needle-in-a-haystack at long contexts: --context-tokens fills the prompt, multi-token pair
formats stay token-exact (the per-offset splice check agrees with a full round trip), scoring
multi-token candidates from the prompt's cache equals plain forward passes, and a sweep holds
one batch of contents in memory, not the whole sweep."""

import tracemalloc

import numpy as np
import pytest
import torch

import phasescope
from phasescope.backends import from_callable
from phasescope.backends import logits as logits_backend
from phasescope.backends.hf_model import HFSession
from phasescope.kv import scheme
from phasescope.model import Decoder, preset
from phasescope.probes import KVRetrievalProbe, KVRetrievalSpec, ProbeError
from phasescope.probes.kv_retrieval_text import TextKVRetrievalProbe, TextKVSpec
from test_probes import _word_bpe
from test_sweep import TASK

OFFSETS = list(range(8))


def reads_back(tok, ids):
    return tok.encode(tok.decode(ids)).ids == ids


@pytest.mark.parametrize("pair_format", ["numbers", "codes", "pieces"])
@pytest.mark.parametrize("design", ["shift-needle", "pad-prefix"])
def test_context_tokens_fills_the_prompt_and_every_item_is_token_exact(pair_format, design):
    tok = _word_bpe()
    context = 2048 if pair_format != "pieces" else 560  # the test tokenizer has ~150 one-token pieces
    spec = TextKVSpec(context_tokens=context, pair_format=pair_format, design=design)
    probe = TextKVRetrievalProbe(tok, spec, min_gap=40)
    items = probe.items(OFFSETS, 3, np.random.default_rng(0))
    unused = 40 if pair_format != "codes" else 80  # at most the lead, the needle's filler and a line
    for item in items:
        assert context - unused <= len(item.input_ids) + len(item.candidates["right"]) <= context
        assert reads_back(tok, item.input_ids), "the full round trip holds at every offset"
        value = item.input_ids[item.value_pos : item.value_last + 1]
        assert value == item.candidates["right"]
        key = item.input_ids[item.key_pos : item.value_pos - 1]
        question_key = item.input_ids[-len(key) - len(probe.ask[1]) : -len(probe.ask[1])]
        assert key == question_key, "the question names the needle's key"
        assert item.answer_pos - 1 - item.value_last >= 40
    anchors = {(it.content_id, it.offset): it.anchor_pos for it in items}
    for (content, d), pos in anchors.items():
        assert pos == anchors[(content, 0)] + d


def test_keys_are_distinct_so_the_question_has_one_answer():
    tok = _word_bpe()
    probe = TextKVRetrievalProbe(tok, TextKVSpec(context_tokens=4096, pair_format="numbers"))
    item = probe.items(OFFSETS, 1, np.random.default_rng(1))[0]
    text = tok.decode(item.input_ids)
    key = tok.decode(item.input_ids[item.key_pos : item.value_pos - 1]).strip()
    assert text.count(f" {key}:") == 1


class DigitSpaceTokenizer:
    """One token per character, except a digit followed by a space, which is one token: a
    splice that ends a line's digits right before the needle's leading space re-tokenizes."""

    def __init__(self):
        chars = sorted(set("0123456789abcdefghijklmnopqrstuvwxyzQRA ?:.-~=\n"))
        self.vocab = {c: i for i, c in enumerate(chars)}
        self.vocab |= {d + " ": len(self.vocab) + i for i, d in enumerate("0123456789")}
        self.inverse = {i: c for c, i in self.vocab.items()}

    def encode(self, text, add_special_tokens=False):
        ids, i = [], 0
        while i < len(text):
            pair = text[i : i + 2]
            if pair in self.vocab and pair[0].isdigit():
                ids.append(self.vocab[pair])
                i += 2
            else:
                ids.append(self.vocab[text[i].lower()] if text[i].lower() in self.vocab else self.vocab["."])
                i += 1
        return ids

    def decode(self, ids):
        return "".join(self.inverse[i] for i in ids)

    def __call__(self, texts, add_special_tokens=False):
        return {"input_ids": [self.encode(t) for t in texts]}


def test_the_per_offset_splice_check_agrees_with_a_full_round_trip():
    """At every offset, the check of the touched lines accepts exactly the prompts whose whole
    round trip holds: here the filler before the needle is swapped for digits, which this
    tokenizer glues to the needle's leading space (so those prompts re-tokenize), while offsets
    with no filler before the needle stay exact."""
    from phasescope.probes.padding import Padding

    tok = DigitSpaceTokenizer()
    probe = TextKVRetrievalProbe(tok, TextKVSpec(n_pairs=40, pair_format="numbers", filler="~"))
    probe.n_pairs = 40
    real_fillers, real_check = probe.fillers, probe._check_splice
    verdicts = []

    class DigitsBeforeTheNeedle:
        def between(self, left, right, tokens, where):
            if tokens and right.startswith(needle_text):
                return Padding("7" * tokens, tokens, tokens, tuple(tok.encode("7" * tokens)))
            return real_fillers.between(left, right, tokens, where)

    def spy(prompt, *args):
        try:
            real_check(prompt, *args)
            local_ok = True
        except ProbeError:
            local_ok = False
        verdicts.append((local_ok, tok.encode(tok.decode(prompt)) == prompt))
        if not local_ok:
            raise ProbeError("refused")

    probe.fillers, probe._check_splice = DigitsBeforeTheNeedle(), spy
    for seed in range(3):
        content = probe._content(40, np.random.default_rng(seed))
        needle_text = tok.decode(content.key)
        for d in range(40):
            try:
                probe._place(content, 0, d, 0, 0)
            except ProbeError:
                pass
    assert all(local == full for local, full in verdicts)
    assert {full for _, full in verdicts} == {True, False}, "both kinds of prompt occur"


def test_multi_token_candidates_from_the_prompt_cache_equal_plain_forwards(tmp_path, monkeypatch):
    from hf_models import tiny_qwen3, word_tokenizer

    monkeypatch.setattr(logits_backend, "LONG_PROMPT", 0)  # use the cache path at test sizes
    monkeypatch.setattr(HFSession, "chunk", 7)  # and read long inputs in chunks, as at 128K
    tok = word_tokenizer()
    hf = f"hf:{tiny_qwen3(tmp_path / 'm', tok)}"
    torch.manual_seed(0)
    native = Decoder(preset("tiny", len(tok), scheme("tiny-4", local=8)))
    kwargs = dict(step=4, local=8, samples=2, offsets=OFFSETS, context_tokens=600, pair_format="numbers")
    for model in (hf, native):
        extra = {} if model is hf else {"tokenizer": tok}
        cached = phasescope.sweep(model, **kwargs, **extra).records
        plain = phasescope.sweep(model, prefix_reuse=False, **kwargs, **extra).records
        assert len(cached) == len(plain) == 16
        for a, b in zip(cached, plain, strict=True):
            assert a.correct == b.correct
            assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
            assert len(a.logprobs) == 4


def test_native_context_tokens_lays_training_rows_end_to_end():
    probe = KVRetrievalProbe(TASK, KVRetrievalSpec(context_tokens=4096), min_gap=24)
    items = probe.items(OFFSETS, 2, np.random.default_rng(0))
    for item in items:
        assert 4000 <= len(item.input_ids) <= 4096
        key = item.input_ids[-1]
        keys_in_haystack = [p for p, t in enumerate(item.input_ids[:-1]) if t == key]
        assert keys_in_haystack == [item.key_pos], "only the needle carries the asked key"
        assert item.input_ids[item.value_pos] == item.candidates["right"][0]
        assert item.answer_pos - 1 - item.value_last >= 24
    assert items[3].anchor_pos == items[0].anchor_pos + 3


def test_a_sweep_holds_one_batch_of_contents_not_the_whole_sweep():
    """Python memory of a streamed sweep barely grows with the number of contents."""
    tok = _word_bpe()

    def logits(ids):
        return torch.zeros(ids.shape[0], ids.shape[1], 700)

    model = from_callable(logits, vocab_size=700, step=4)
    model.info.tokenizer = tok

    def peak(samples):
        tracemalloc.start()
        result = phasescope.sweep(
            model, offsets=OFFSETS, samples=samples, context_tokens=8192, pair_format="numbers", batch_size=1
        )
        top = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert len(result.records) == samples * len(OFFSETS)
        return top

    small, large = peak(2), peak(8)
    one_content = 8 * 8192 * 8  # pointers of 8 prompts of 8192 tokens
    assert large < small + one_content, (small, large)


def test_bad_context_sizes_are_refused_with_the_fix():
    tok = _word_bpe()
    with pytest.raises(ProbeError, match="context_tokens=10 is invalid"):
        TextKVSpec(context_tokens=10)
    probe = TextKVRetrievalProbe(tok, TextKVSpec(context_tokens=70, pair_format="codes"))
    with pytest.raises(ProbeError, match="raise --context-tokens"):
        probe.items(OFFSETS, 1, np.random.default_rng(0))
    with pytest.raises(ProbeError, match="--pair-format numbers, codes or auto"):
        TextKVRetrievalProbe(tok, TextKVSpec(context_tokens=131072, pair_format="pieces")).items(
            OFFSETS, 1, np.random.default_rng(0)
        )
