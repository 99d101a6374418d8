"""Probes are token-exact: the anchor lands where planned at every offset."""

import json
import re

import numpy as np
import pytest

from phasescope.data.retrieval import RetrievalTask
from phasescope.probes import CompletionSpec, KVRetrievalProbe, KVRetrievalSpec, PaddingCompletionProbe, ProbeError

TASK = RetrievalTask(
    n_keys=32, n_values=32, n_filler=8, n_pairs=16, n_queries=8, max_gap=2, min_distance=8, seq_len=128
)
OFFSETS = list(range(24))


@pytest.mark.parametrize("design", ["shift-needle", "pad-prefix"])
def test_kv_retrieval_anchor_lands_at_base_plus_offset_for_every_content(design):
    probe = KVRetrievalProbe(TASK, KVRetrievalSpec(design=design))
    items = probe.items(OFFSETS, 5, np.random.default_rng(0))
    base = probe.base(max(OFFSETS))
    for item in items:
        assert item.key_pos == base + item.offset
        assert item.anchor_pos == item.value_pos == item.key_pos + TASK.key_len
        assert item.input_ids[item.value_pos : item.value_last + 1] == item.candidates["right"]
        assert item.input_ids[-TASK.key_len :] == item.input_ids[item.key_pos : item.key_pos + TASK.key_len]
        assert item.answer_pos == len(item.input_ids)
        assert item.answer_pos - item.value_last > TASK.min_distance, "the query is beyond the raw window"
        assert len(set(map(tuple, item.candidates.values()))) == len(item.candidates), "candidates differ"
    by_content = {}
    for item in items:
        by_content.setdefault(item.content_id, []).append(item)
    for group in by_content.values():
        lengths = {len(it.input_ids) for it in group}
        if design == "shift-needle":
            assert len(lengths) == 1, "total length and query position are fixed"
            # the same content: removing the needle gives one sequence for every offset
            rest = {tuple(it.input_ids[: it.key_pos] + it.input_ids[it.key_pos + TASK.pair_len :]) for it in group}
            assert len(rest) == 1
        else:
            assert sorted(lengths) == sorted(len(group[0].input_ids) + d for d in range(len(group)))
            tails = {tuple(it.input_ids[1 + it.offset :]) for it in group}
            assert len(tails) == 1, "pad-prefix shifts identical content"


def test_kv_retrieval_rejects_offsets_that_do_not_fit():
    with pytest.raises(ProbeError, match="do not fit"):
        KVRetrievalProbe(TASK).items(list(range(200)), 1, np.random.default_rng(0))


def _bpe_tokenizer():
    """A byte-level BPE trained here on Python-like text (no downloads)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    corpus = [
        "import torch\ndef f(x):\n    return x.to(torch.float32)\n",
        '    """Docstring.\n    ========\n    """\n',
        "y = (x * scale).clamp(-448.0, 448.0)\nreturn y.to(torch.float8_e4m3fn)\n",
        "a == b; c = d; e = = f; ==== ===\n",
    ] * 50
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        corpus, trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    )
    return tok


def _by_content(items):
    groups = {}
    for item in items:
        groups.setdefault(item.content_id, []).append(item)
    return groups


def test_padding_completion_samples_distinct_token_exact_contents_with_a_local_bpe():
    from phasescope.probes.code_prompts import PROMPTS

    tok = _bpe_tokenizer()
    probe = PaddingCompletionProbe(tok)
    groups = _by_content(probe.items(OFFSETS, 12, np.random.default_rng(0)))
    assert sorted(groups) == list(range(12)) and len(probe.contents) == len(probe.placements) == 12
    assert len({spec.prompt for spec in probe.contents}) == 12, "12 distinct contents"
    assert {spec.name.split("/")[0] for spec in probe.contents} == {p.name for p in PROMPTS}, "every function"
    for c, group in groups.items():
        spec, placed = probe.contents[c], probe.placements[c]
        for item in group:
            assert item.anchor_pos == item.answer_pos == placed.base + item.offset == len(item.input_ids)
            assert set(item.candidates) == {"right", "wrong"} and item.target == "right"
            # the ids are the prompt with the recorded padding, as the tokenizer reads it
            padding = item.padding
            assert tok.decode(item.input_ids) == spec.prompt.replace("{pad}", padding["text"])
            assert tok.encode(tok.decode(item.input_ids)).ids == item.input_ids
            assert padding["units"] == padding["text"].count("=") and padding["chars"] == len(padding["text"])
    assert probe.spec()["contents"][0]["answer_pos_at_offset_0"] == probe.placements[0].base


def test_padding_completion_contents_are_deterministic_given_the_seed():
    tok = _bpe_tokenizer()

    def names(n, seed):
        probe = PaddingCompletionProbe(tok)
        probe.items([0, 1], n, np.random.default_rng(seed))
        return [spec.name for spec in probe.contents]

    assert names(12, 0) == names(12, 0) and names(12, 0) != names(12, 1)
    assert names(20, 0)[:12] == names(12, 0), "more samples extend the same list"
    assert len(set(names(64, 0))) == 64
    with pytest.raises(ProbeError, match="64 distinct built-in contents"):
        names(65, 0)


def test_the_study_prompt_is_one_of_the_built_in_contents():
    from phasescope.probes.padding_completion import FP8_PROMPT

    probe = PaddingCompletionProbe(_bpe_tokenizer())
    probe.items([0], 64, np.random.default_rng(0))
    assert FP8_PROMPT in [spec.prompt for spec in probe.contents]


class MergingTokenizer:
    """Merges any run of '=', spaces and newlines into one token: no padding of '=' next to a
    newline can lengthen the prompt."""

    def __init__(self):
        self.vocab: dict[str, int] = {}

    def encode(self, text, add_special_tokens=False):
        pieces = re.findall(r"[=\s]+|\w+|[^\w=\s]", text)
        return [self.vocab.setdefault(piece, len(self.vocab)) for piece in pieces]

    def decode(self, ids, skip_special_tokens=False):
        inverse = {i: piece for piece, i in self.vocab.items()}
        return "".join(inverse[i] for i in ids)


def test_a_pad_unit_no_padding_can_place_is_refused_naming_the_content_and_offsets():
    good = CompletionSpec(prompt="x = 1\n{pad}\ny = x.to(float", pad_unit="#", name="hashes")
    message = r"content 1 \(equals\): no padding puts the answer at every offset .* '=': offsets \[1, 2, 3"
    with pytest.raises(ProbeError, match=message):
        PaddingCompletionProbe(MergingTokenizer(), [good, CompletionSpec(name="equals")]).items(
            OFFSETS, 2, np.random.default_rng(0)
        )
    with pytest.raises(ProbeError, match=r"content 0 \([a-z0-9-]+/doc\d\): no padding"):
        PaddingCompletionProbe(MergingTokenizer()).items(OFFSETS, 12, np.random.default_rng(0))


def test_a_candidate_that_merges_with_the_prompt_end_is_refused_naming_the_content():
    # "flo" + "at8": the trained BPE reads "float" as one token, so the prompt's last token changes
    spec = CompletionSpec(prompt="{pad}\ny = x.to(torch.flo", candidates={"right": "at8", "wrong": "at32"}, name="cut")
    with pytest.raises(ProbeError, match=r"content 0 \(cut\): candidate 'right' \('at8'\) merges"):
        PaddingCompletionProbe(_bpe_tokenizer(), spec).items(OFFSETS, 1, np.random.default_rng(0))


def test_a_list_of_prompts_in_a_probe_file_gives_one_content_each(tmp_path):
    path = tmp_path / "prompts.json"
    prompts = [{"prompt": f"x{i} = 1\n#{{pad}}\nreturn x.to(torch.float", "name": f"p{i}"} for i in range(3)]
    path.write_text(json.dumps(prompts))
    specs = CompletionSpec.list_from_file(path)
    assert [s.name for s in specs] == ["p0", "p1", "p2"] and specs[0].candidates == {"right": "8", "wrong": "32"}
    probe = PaddingCompletionProbe(_bpe_tokenizer(), specs)
    assert probe.default_samples() == 3
    assert sorted(_by_content(probe.items(OFFSETS, 3, np.random.default_rng(0)))) == [0, 1, 2]
    with pytest.raises(ProbeError, match="4 content samples were asked but 3 prompt"):
        probe.items(OFFSETS, 4, np.random.default_rng(0))
    with pytest.raises(ProbeError, match="expected one prompt"):
        CompletionSpec.from_file(path)
    path.write_text(json.dumps([prompts[0], {"prompt": "no placeholder"}]))
    with pytest.raises(ProbeError, match="placeholder"):
        CompletionSpec.list_from_file(path)
    path.write_text("[]")
    with pytest.raises(ProbeError, match="empty"):
        CompletionSpec.list_from_file(path)


def test_completion_spec_from_file_validates(tmp_path):
    path = tmp_path / "probe.json"
    path.write_text('{"prompt": "x = {pad} y", "candidates": {"a": "1"}, "target": "b"}')
    with pytest.raises(ProbeError, match="target 'b' is not one of the candidates"):
        CompletionSpec.from_file(path)


def _word_bpe():
    """A byte-level BPE trained here on made-up words, so many words are one token."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    syllables = ["ba", "ko", "ri", "te", "mu", "sa", "lo", "ne", "vi", "du"]
    words = [a + b + c for a in syllables for b in syllables for c in syllables[:3]][:150]
    corpus = [
        " ".join(words[i : i + 10]) + ".\nRemember the pairs. Question: what goes with? Answer:" for i in range(150)
    ]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(
        corpus * 20, trainers.BpeTrainer(vocab_size=700, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    )
    return tok


@pytest.mark.parametrize("design", ["shift-needle", "pad-prefix"])
def test_text_kv_retrieval_is_token_exact_with_a_local_bpe(design):
    from phasescope.probes.kv_retrieval_text import TextKVRetrievalProbe, TextKVSpec

    tok = _word_bpe()
    probe = TextKVRetrievalProbe(tok, TextKVSpec(n_pairs=20, design=design))
    items = probe.items(OFFSETS, 3, np.random.default_rng(0))
    for content in range(3):
        group = [it for it in items if it.content_id == content]
        base = group[0].anchor_pos
        for item in group:
            assert item.anchor_pos == base + item.offset
            assert item.input_ids[item.value_pos] == item.candidates["right"][0]
            assert tok.encode(tok.decode(item.input_ids)).ids == item.input_ids  # what the model would read
            assert item.input_ids[item.key_pos] in item.input_ids[-6:], "the question names the needle's key"


def test_text_kv_retrieval_needs_enough_single_token_pieces():
    from phasescope.probes.kv_retrieval_text import TextKVRetrievalProbe, TextKVSpec

    with pytest.raises(ProbeError, match="single-token pieces"):
        TextKVRetrievalProbe(_bpe_tokenizer(), TextKVSpec(pair_format="pieces"))
    auto = TextKVRetrievalProbe(_bpe_tokenizer())  # too few words: numbers
    assert auto.format.name == "numbers" and auto.spec()["pair_format_used"] == "numbers"


def test_the_pieces_format_was_called_words_and_runs_made_under_that_name_resume(qwen3_dir, tmp_path):
    """#46 part 10: single-token vocabulary pieces are often not words (DeepSeek-V4's 'jednine',
    'được'), so the format is named pieces; 'words' still reads as it, and a run whose spec.json
    says words resumes (the same draw)."""
    import json

    import phasescope
    from phasescope.probes.kv_options import Options, TextKVSpec

    assert Options(pair_format="words").pair_format == TextKVSpec(pair_format="words").pair_format == "pieces"
    run = tmp_path / "run"
    common = dict(step=4, samples=2, offsets=range(8), out=run)
    first = phasescope.sweep(f"hf:{qwen3_dir}", pair_format="pieces", **common)
    spec = json.loads((run / "spec.json").read_text())
    assert spec["probe"]["pair_format_used"] == "pieces"
    old = json.dumps(spec).replace('"pieces"', '"words"')  # as the release before the rename wrote it
    (run / "spec.json").write_text(old)
    lines = (run / "records.jsonl").read_text().splitlines()
    (run / "records.jsonl").write_text("\n".join(lines[:5]) + "\n")
    resumed = phasescope.sweep(f"hf:{qwen3_dir}", pair_format="words", **common)
    assert resumed.scored == len(first.records) - 5
    assert [r.logprob_target for r in resumed.records] == [r.logprob_target for r in first.records]
