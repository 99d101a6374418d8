"""Probe base class: token-exact items that place the same content at many offsets.

A probe builds, for each content sample and each offset, one ``ProbeItem``: the prompt ids
the model reads, the candidate answers (token ids), which one is right, and every position
that matters (docs/design.md, 'Definitions': positions index the exact id sequence, BOS included). Probes
check their own token exactness and raise ``ProbeError`` before any scoring starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from phasescope.errors import InputError, ProbeError  # noqa: F401  (ProbeError: re-exported)
from phasescope.rundir.records import Record
from phasescope.specs import Geometry, ProbeSpec


@dataclass(frozen=True)
class ProbeContext:
    """What a probe is built from (each registered probe's ``build(ctx)``): the user's probe
    options, the resolved geometry, and what the model brings (tokenizer, BOS, its task)."""

    spec: ProbeSpec
    geometry: Geometry
    tokenizer: object | None = None
    bos_id: int | None = None
    task: object | None = None  # data.retrieval.RetrievalTask: a native model's own, or given
    completion: object | None = None  # padding-completion: CompletionSpec(s) from --probe-file or Python
    model: str = "the model"  # for messages
    max_len: int | None = None  # the model's longest sequence (None: unknown)

    @property
    def min_gap(self) -> int:
        """Tokens the needle must end before the question: the raw window plus one window."""
        local = self.geometry.local
        return 0 if local is None else local + self.geometry.window

    def need_tokenizer(self) -> object:
        if self.tokenizer is None:
            raise ProbeError(
                f"the {self.spec.name} probe is written in text and {self.model} brings no tokenizer: pass "
                "--tokenizer (a tokenizer directory, or deepseek-v4 / qwen3), or tokenizer=... in Python"
            )
        return self.tokenizer


@dataclass
class ProbeItem:
    content_id: int
    offset: int
    input_ids: list[int]  # the prompt; the answer follows it
    candidates: dict[str, list[int]]  # candidate name -> answer token ids
    target: str  # name of the right candidate
    anchor_pos: int  # position that defines the phase
    answer_pos: int  # position of the first answer token (= len(input_ids))
    key_pos: int | None = None  # first key token (probes with keys)
    value_pos: int | None = None  # first value token of the needle
    value_last: int | None = None  # last value token of the needle
    variant: int = 0  # index of the rendering when a probe renders each content several ways (--kv-gaps)
    # correct when: "greedy" decoding reproduces the target's tokens; "choice": the target has
    # the highest log-prob of the candidates (multiple choice, as lm-evaluation-harness's acc)
    rule: str = "greedy"
    # what moved the anchor, as measured (probes.padding.Padding.record): text, chars, units, tokens
    padding: dict | None = None
    # greedy generation after the prompt (run.generation.Generate: most tokens, stop); its ids go to ``grade``
    generate: object | None = None
    # (scored Record, generated ids or None) -> fields set in the record (the probe's own metric,
    # e.g. an lm-eval task's; Record fields or other names, JSON values)
    grade: Callable[[Record, list[int] | None], dict] | None = None
    context_tokens: int | None = None  # the length band (--context-tokens A,B,...); None: one length


def by_length(probe, offsets: list[int], n_samples: int, rng: np.random.Generator):
    """A probe's stream (``probe._stream``) at its one length, or at each of its length bands
    (``banded``)."""
    if len(probe.params.lengths()) == 1:
        yield from probe._stream(offsets, n_samples, rng)
    else:
        yield from banded(probe, offsets, n_samples, rng)


def banded(probe, offsets: list[int], n_samples: int, rng: np.random.Generator):
    """A probe's contents at each of its length bands (``probe.params.lengths()``), content by
    content: each band is the probe at that length (``probe.at_length``) streaming from its own
    random stream (``probe._stream``); band b's items get variant ``b * renderings + their own``
    (renderings: the kv-gaps) and ``context_tokens``."""
    lengths = probe.params.lengths()
    renderings = len(probe.params.kv_gaps)
    parts = [probe.at_length(n) for n in lengths]
    streams = [part._stream(offsets, n_samples, r) for part, r in zip(parts, rng.spawn(len(parts)), strict=True)]
    for groups in zip(*streams, strict=True):
        yield [
            replace(item, variant=b * renderings + item.variant, context_tokens=lengths[b])
            for b, group in enumerate(groups)
            for item in group
        ]


def check_depth_and_gaps(depth: float, kv_gaps: tuple[int, ...]) -> None:
    if not 0 <= depth <= 1:
        raise ProbeError(f"depth={depth!r} is invalid; allowed: a fraction in [0, 1] (0.5: the middle)")
    gaps = list(kv_gaps)
    if not gaps or any(not isinstance(g, int) or g < 0 for g in gaps) or len(set(gaps)) != len(gaps):
        raise ProbeError(f"kv_gaps={kv_gaps!r} is invalid; allowed: distinct integers >= 0, e.g. 0,1")


def judge(item: ProbeItem, result: dict) -> bool:
    """Whether an item was answered correctly -- the one place this is decided. ``result`` is a
    backend's: ``greedy`` (greedy decoding reproduces the target's tokens) and ``logprobs``.
    Rule "greedy": that; rule "choice" (multiple choice, as lm-evaluation-harness's acc): the
    target's log-prob is strictly the highest of the candidates'."""
    if item.rule == "choice":
        target = result["logprobs"][item.target]
        return all(target > v for name, v in result["logprobs"].items() if name != item.target)
    return bool(result["greedy"])


def check_needle_placement(items: list[ProbeItem], local: int | None, window: int) -> None:
    """Refuse items whose needle the model could read uncompressed (docs/design.md, 'Where the needle goes').

    The query (the position predicting the answer, ``answer_pos - 1``) sees raw tokens
    ``q-L+1 .. q``; the needle's last token must lie at least ``L + window`` tokens before it,
    so the model can only reach it through compressed entries.
    """
    if local is None:
        return
    need = local + window
    for item in items:
        if item.value_last is None:
            continue
        gap = item.answer_pos - 1 - item.value_last
        if gap < need:
            raise ProbeError(
                f"content {item.content_id} at offset {item.offset}: the needle ends {gap} tokens before the question, "
                f"inside the model's raw window (L = {local}) plus one compression window ({window}), so the model "
                f"would read it uncompressed; the needle must end >= {need} tokens before the question. Move it back "
                "(lower --depth), lengthen the prompt (kv-retrieval in words: more pairs; native ids: a task whose "
                f"min_distance >= {need}), or, if the model's raw window is really smaller, pass --local"
            )


class Probe:
    name: ClassVar[str]
    summary: ClassVar[str]
    has_keys: ClassVar[bool] = False
    # records number the contents 0 .. samples - 1, each at every offset and variant (what readers
    # check a record's content and a run's count against; spec.json records it): lm-eval's number
    # documents task by task instead
    contents_by_sample: ClassVar[bool] = True

    def items(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> list[ProbeItem]:
        """Every content sample at every offset (paired design). A probe defines ``items`` or
        ``stream``; each defaults to the other."""
        if type(self).stream is Probe.stream:
            raise NotImplementedError(f"{type(self).__name__} defines neither items nor stream")
        return [item for group in self.stream(offsets, n_samples, rng) for item in group]

    def stream(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> Iterator[list[ProbeItem]]:
        """The items of one content at a time (all its offsets and variants), in content order, so
        a sweep of long prompts holds a batch of contents, never the whole sweep. The same rng
        state gives the same items as ``items``."""
        if type(self).items is Probe.items:
            raise NotImplementedError(f"{type(self).__name__} defines neither items nor stream")
        by_content: dict = {}
        for item in self.items(offsets, n_samples, rng):
            by_content.setdefault(item.content_id, []).append(item)
        yield from by_content.values()

    def spec(self) -> dict:
        """JSON-able description of the probe's parameters (for spec.json)."""
        raise NotImplementedError

    def default_samples(self) -> int:
        """Content samples when the caller does not say (a probe with a fixed set: all of them)."""
        return 50
