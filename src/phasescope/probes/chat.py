"""``--chat-template``: a text probe's prompts wrapped in the tokenizer's chat template.

Off by default: a chat template adds tokens before the prompt, and every position (so every
phase) moves with them. When asked, the prompt becomes the user turn and the answer follows
the generation prompt; the template's tokens count in every position the records carry::

    [template prefix] [BOS-less probe prompt ...] [template suffix, e.g. end of turn + assistant] -> answer
     ^ position 0       ^ every planned position + len(prefix)
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import numpy as np

from phasescope.probes.base import Probe, ProbeError, ProbeItem
from phasescope.probes.padding_completion import encoder

MARK = "\u241fPHASESCOPE\u241f"  # stands for the prompt inside the rendered template


class ChatTemplated(Probe):
    def __init__(self, inner: Probe, tokenizer):
        if not getattr(tokenizer, "chat_template", None):
            raise ProbeError("--chat-template: this tokenizer has no chat template")
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": MARK}], tokenize=False, add_generation_prompt=True
        )
        if text.count(MARK) != 1:
            raise ProbeError("--chat-template: the template does not place the user's message exactly once")
        encode = encoder(tokenizer)
        before, after = text.split(MARK)
        self.inner, self.prefix, self.suffix = inner, encode(before), encode(after)
        if hasattr(inner, "lead_in"):  # a probe that places anchors at one phase counts the template's tokens too
            inner.lead_in = len(self.prefix)
        self.name, self.summary, self.has_keys = inner.name, inner.summary, inner.has_keys
        self.contents_by_sample = inner.contents_by_sample

    def spec(self) -> dict:
        return {**self.inner.spec(), "chat_template": {"prefix_ids": self.prefix, "suffix_ids": self.suffix}}

    def default_samples(self) -> int:
        return self.inner.default_samples()

    def stream(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> Iterator[list[ProbeItem]]:
        for group in self.inner.stream(offsets, n_samples, rng):
            yield [self._wrap(item) for item in group]

    def _wrap(self, item: ProbeItem) -> ProbeItem:
        shift = len(self.prefix)

        def moved(position: int | None) -> int | None:
            return None if position is None else position + shift

        ids = self.prefix + item.input_ids + self.suffix
        return replace(
            item,
            input_ids=ids,
            anchor_pos=moved(item.anchor_pos) if item.anchor_pos != item.answer_pos else len(ids),
            answer_pos=len(ids),
            key_pos=moved(item.key_pos),
            value_pos=moved(item.value_pos),
            value_last=moved(item.value_last),
        )
