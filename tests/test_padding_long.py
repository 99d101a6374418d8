"""A long prompt's padding is searched on the text around it and checked on the whole prompt:
the placement equals the whole-prompt search (the slow reference), on both real tokenizers."""

import runpy
from pathlib import Path

import pytest

from phasescope.backends.tokenizers import named_tokenizer
from phasescope.probes.padding import LOCAL_CHARS, AnswerPlacer
from phasescope.probes.padding_completion import decoder, encoder

OFFSETS = list(range(12))
# the benchmark's prompt (benchmarks/padding_search.py), loaded from its file
long_prompt = runpy.run_path(str(Path(__file__).resolve().parents[1] / "benchmarks" / "padding_search.py"))[
    "long_prompt"
]


@pytest.mark.parametrize("name", ["qwen3", "deepseek-v4"])
def test_a_long_prompt_is_placed_as_the_whole_prompt_search_places_it(name):
    tokenizer = named_tokenizer(name)
    placer = AnswerPlacer(encoder(tokenizer), decoder(tokenizer), step=4, align=0, head=())
    before, after = long_prompt(200)  # longer prompts: benchmarks/padding_search.py (400 and 4,000 functions)
    assert len(before) > 2 * LOCAL_CHARS and len(after) > 2 * LOCAL_CHARS  # beyond the text the local search reads
    encoded = count_encoded_chars(placer)
    fast = placer.place(before, after, ("=", "\n"), OFFSETS, "test")
    fast_chars = encoded.pop()
    lowest = len(placer.encode(before + after))
    slow, _ = placer._search(before, after, ("=", "\n"), OFFSETS, lowest)  # the whole prompt every time
    slow_chars = encoded.pop()
    assert fast == slow  # same unit, base and padding (text, units, tokens, ids) at every offset
    for d, pad in fast.paddings.items():  # and the whole padded prompt puts the answer at base + d
        assert len(placer.encode(before + pad.text + after)) == fast.base + d
    # the work, counted rather than timed (a timing breaks on a busy machine): the local search
    # and its whole-prompt checks tokenize less than half of what the whole-prompt search does
    assert slow_chars > 2 * fast_chars, (slow_chars, fast_chars)


class count_encoded_chars:  # noqa: N801 (used as a function)
    """Counts the characters ``placer`` tokenizes; ``pop()`` returns the count so far and restarts it."""

    def __init__(self, placer: AnswerPlacer):
        self.chars, encode = 0, placer.encode

        def counting(text: str):
            self.chars += len(text)
            return encode(text)

        placer.encode = counting

    def pop(self) -> int:
        chars, self.chars = self.chars, 0
        return chars


def test_a_placement_that_fails_the_whole_prompt_check_falls_back_to_the_whole_search(monkeypatch):
    """If the text far from the padding tokenized differently with it (a check fails), the long
    prompt is searched whole, as a short one is."""
    import phasescope.probes.padding as padding

    tokenizer = named_tokenizer("qwen3")
    placer = AnswerPlacer(encoder(tokenizer), decoder(tokenizer), step=4, align=0, head=())
    before, after = long_prompt(100)
    assert len(before) > LOCAL_CHARS and len(after) > LOCAL_CHARS  # long: the local search is tried first
    calls = []
    real = padding.fit

    def failing_whole_check(encode, decode, b, a, pad, fuse, head=(), sides=None):
        calls.append(len(b))
        first_whole = len(b) == len(before) and calls.count(len(before)) == 1
        return None if first_whole else real(encode, decode, b, a, pad, fuse, head, sides)

    monkeypatch.setattr(padding, "fit", failing_whole_check)
    placed = placer.place(before, after, ("=",), OFFSETS, "test")
    whole = sum(c == len(before) for c in calls)
    assert whole > len(OFFSETS) + 2  # the failed check, then the whole search: many whole-prompt fits
    monkeypatch.setattr(padding, "fit", real)
    assert placed == placer._search(before, after, ("=",), OFFSETS, len(placer.encode(before + after)))[0]
