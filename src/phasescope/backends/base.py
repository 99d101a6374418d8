"""A backend is a loaded model that scores probe items (the lm-evaluation-harness shape): what
it knows about itself (``ModelInfo``) and ``score(items) -> results``. One base class, one
file per kind of model spec (``hf:``, ``openai:``, a phasescope directory), a lazy registry
keyed by the spec's prefix (``phasescope.backends``): docs/design.md, "Layers".

A result is a ``Scored`` (``result`` builds it): ``greedy`` says whether greedy decoding
reproduces the target's tokens; whether the item is *correct* is decided once, by
``probes.base.judge`` (greedy, or the highest log-prob for multiple choice). A served model's
answer that broke the protocol is ``{"protocol": {"kind", "message"}}`` instead: a finding the
sweep records apart, never a score.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np

from phasescope.errors import InputError
from phasescope.probes.base import ProbeItem
from phasescope.specs import ModelGeometry

__all__ = ["Backend", "ModelInfo", "Scored", "ScoringPlan", "check_device", "load_tokenizer"]


class Scored(TypedDict, total=False):
    """One item's score, as every backend returns it (``result`` builds the first five)."""

    greedy: bool  # greedy decoding reproduces every token of the target
    logprob_target: float  # the target's teacher-forced log-prob (summed over its tokens)
    logprobs: dict[str, float]  # candidate name -> teacher-forced log-prob
    answer_ids: list[int]  # what greedy decoding answered along the target (``greedy_along``)
    token_logprobs: list[float]  # a multi-token target: each token's log-prob (one request each, served)
    token_correct: list[bool]  # ... and whether greedy decoding's token there is the target's
    request_lengths: list[int]  # served: the prompt lengths of the item's requests
    answer_from: str  # served: "teacher-forced" or "generation" (which decided ``greedy``)
    protocol: dict  # served: the answer broke the protocol (kind, message); nothing else is set


@dataclass
class ModelInfo:
    """What a loaded model knows about itself."""

    vocab_size: int | None
    geometry: ModelGeometry = field(default_factory=ModelGeometry)  # step None: not compressed
    fingerprint: str = ""  # weights (and options that change logits): a resume with others is refused
    task: dict | None = None  # the retrieval task a phasescope model was trained on
    description: str = ""
    tokenizer: object | None = None  # for probes written in text
    bos_id: int | None = None  # prepended by text probes when the model expects it
    max_len: int | None = None  # longest sequence the model accepts (None: unknown)
    callable_only: bool = False  # a bare Python callable: it can declare nothing about itself


@dataclass(frozen=True)
class ScoringPlan:
    """What the sweep tells a backend before scoring: the phase geometry (where a shared prefix
    may be cut), the batch size, and what the first pass learned about the items."""

    step: int
    align: int
    batch_size: int
    prefix_reuse: bool = True
    single_token: bool = True  # every candidate of every item is one token
    longest: int = 0  # tokens of the longest prompt + candidate


class Backend:
    """A loaded model. Subclasses define ``score``; ``batches`` and ``cost`` have defaults."""

    info: ModelInfo
    plan: ScoringPlan | None = None
    timed_in_dry_run = True  # --dry-run scores one batch to time it; False where a call costs (a server)

    def prepare(self, plan: ScoringPlan) -> None:
        self.plan = plan

    def reuses_cache(self) -> bool:
        """Whether batches are read through a cache shared by a content's offsets (logits backends)."""
        return False

    def batches(self, chunk: list[ProbeItem]) -> list[list[ProbeItem]]:
        """A chunk (some contents, every offset and variant) cut into scoring batches: one offset
        and variant at a time, ``batch_size`` items each (a resumed run cuts the same batches)."""
        return plain_batches(chunk, self.plan.batch_size)

    def score(self, items: list[ProbeItem]) -> list[Scored]:
        """One result per item, in order (see the module docstring)."""
        raise NotImplementedError

    def generate(self, items: list[ProbeItem]) -> list[list[int]]:
        """Greedy continuation ids of every item (its ``generate``: most tokens, stop test); a
        backend that cannot generate says so."""
        raise InputError(
            f"{type(self).__name__} cannot generate text; generation tasks need an hf:, openai: or local model"
        )

    def cost(self, records: int, sequences: int, candidates: int, prefixes: int = 0) -> dict:
        """What scoring costs, for --dry-run: ``sequences`` = records (single-token candidates) or
        ``candidates`` ((item, candidate) pairs); ``prefixes``: distinct candidate prefixes over
        items (what a served model is asked without echo)."""
        return {"forward_passes": -(-sequences // self.plan.batch_size)}

    @property
    def description(self) -> str:
        return self.info.description


def item_key(item: ProbeItem) -> tuple:
    return (item.content_id, item.offset, item.variant)


def prompt_digest(item: ProbeItem) -> str:
    """What a record was scored on: the prompt ids, every candidate's ids and the target, as 16 hex
    digits of a sha256. A resume keeps a record only when its digest is the one this sweep builds
    (``RunDir.open_for_sweep``); two runs are compared record by record on it (``compare --paired``)."""
    text = json.dumps([item.input_ids, sorted(item.candidates.items()), item.target], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def by_offset(items: list[ProbeItem]) -> list[ProbeItem]:
    return sorted(items, key=lambda it: (it.offset, it.variant, it.content_id))


def plain_batches(items: list[ProbeItem], batch_size: int) -> list[list[ProbeItem]]:
    """Items sorted by (offset, variant, content), cut where the offset or variant changes or a
    batch is full."""
    batches, current = [], []
    for item in by_offset(items):
        if current and (len(current) == batch_size or item_key(current[0])[1:] != item_key(item)[1:]):
            batches.append(current)
            current = []
        current.append(item)
    return batches + ([current] if current else [])


def check_device(device: str) -> None:
    """InputError when ``device`` is not a torch device this torch build can use."""
    import torch

    try:
        parsed = torch.device(device)
    except RuntimeError:
        raise InputError(f"--device {device!r} is not a torch device (e.g. cpu, cuda, cuda:1, mps)") from None
    if parsed.type == "cuda" and not torch.cuda.is_available():
        raise InputError(
            f"--device {device}: this torch build has no CUDA (or no GPU is visible); use --device cpu, or install "
            "a CUDA build of torch"
        )
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        raise InputError(f"--device {device}: MPS is not available here; use --device cpu")


def load_tokenizer(spec: str):
    """A tokenizer by name (``deepseek-v4``, ``qwen3``) or from a local directory; never downloads."""
    from phasescope.backends.tokenizers import load_tokenizer as load

    return load(spec)


def greedy_along(argmaxes: list[int], target: list[int]) -> list[int]:
    """What greedy decoding answers, read from the argmax at each of the target's teacher-forced
    positions: the argmaxes up to and including the first that differs from the target (after it
    the teacher-forced positions no longer follow the greedy path)."""
    for j, (token, wanted) in enumerate(zip(argmaxes, target, strict=True)):
        if token != wanted:
            return argmaxes[: j + 1]
    return list(argmaxes)


def result(item: ProbeItem, scores: dict, answer: list[int], steps: list[tuple[float, int]] | None = None) -> Scored:
    """A backend's result: ``greedy`` (greedy decoding reproduces the target's tokens) read from
    ``answer``, the tokens greedy decoding gives along the target (``greedy_along``), kept as
    ``answer_ids``; the candidates' log-probs; the target's. ``steps``: at each of a multi-token
    target's teacher-forced positions, (its token's log-prob, the argmax token): each request of a
    served model, whose length a serving fault may be keyed on (``token_logprobs``,
    ``token_correct``)."""
    for name, value in scores.items():
        if not np.isfinite(value):
            raise InputError(
                f"the model gives candidate {name!r} probability 0 (log-prob {value}) for content {item.content_id} "
                f"at offset {item.offset}; a probability of exactly 0 means masked logits: score other candidates"
            )
    out: Scored = {
        "greedy": reproduces(item, answer),
        "logprob_target": scores[item.target],
        "logprobs": scores,
        "answer_ids": answer,
    }
    target = item.candidates[item.target]
    if steps is not None and len(target) > 1:
        out["token_logprobs"] = [float(v) for v, _ in steps]
        out["token_correct"] = [int(top) == int(t) for (_, top), t in zip(steps, target, strict=True)]
    return out


def reproduces(item: ProbeItem, answer: list[int]) -> bool:
    """Whether ``answer`` is the target's tokens, every one: greedy decoding got it right (an
    answer that stops early, or one cut at its first wrong token, did not)."""
    return answer == list(item.candidates[item.target])
