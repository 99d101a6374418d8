"""The logits backend: any model we run here, as ``input_ids [B,T] -> logits [B,T,V]`` plus,
when it has one, a cache session that continues a prefix exactly (``backends.prefix``).

Shape legend: B rows in a batch, T tokens, K positions whose logits are kept (``keep``),
V vocabulary.

Scoring paths (results equal up to float rounding; tests/test_prefix.py, test_niah.py):

* prefix reuse (a session, single-token candidates or prompts from ``LONG_PROMPT`` tokens):
  a content's offsets share every token before the needle's earliest position, read once;
  each offset continues from a copy of that cache, logits kept only where scored;
* plain passes: right-padded batches of one offset and variant, every candidate teacher-forced.

Any Python callable becomes a backend with ``from_callable``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from phasescope.backends.base import Backend, ModelInfo, by_offset, item_key, plain_batches
from phasescope.backends.prefix import score_group, score_long
from phasescope.backends.scoring import full_logits, score_items
from phasescope.errors import InputError
from phasescope.probes.base import ProbeItem
from phasescope.specs import ModelGeometry

LONG_PROMPT = 2048  # tokens: from here, multi-token candidates continue from the prompt's cache
REUSE_TOKENS = 4096  # prompt tokens per batch of contents that share their cache over the offsets
LogitsFn = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class LogitsBackend(Backend):
    info: ModelInfo
    logits: LogitsFn
    session: object | None = None  # prefill(ids) -> state; extend / advance (backends.prefix)
    module: object | None = None  # the torch module behind ``logits`` (head ablation hooks it)
    kept: object | None = None  # (ids [B,T], keep [K]) -> logits [B,K,V], computed only there; None: sliced

    def logits_where(self, ids: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """Logits [B,K,V] at positions ``keep`` only (the model computes just those when it can)."""
        return self.kept(ids, keep) if self.kept is not None else full_logits(self.logits)(ids, keep)

    def generate(self, items: list[ProbeItem]) -> list[list[int]]:
        """Greedy decoding, a step for every running item at once (``run.generation``)."""
        return generate_logits(self.logits_where, items)

    def reuses_cache(self) -> bool:
        plan = self.plan
        usable = plan is not None and plan.prefix_reuse and self.session is not None
        return usable and (plan.single_token or plan.longest >= LONG_PROMPT)

    def batches(self, chunk: list[ProbeItem]) -> list[list[ProbeItem]]:
        """With reuse: one variant at every offset (the offsets share the cache) of as many
        contents as ``REUSE_TOKENS`` of prompt hold, so long prompts reach the disk a content or two
        at a time (a 1K-token sweep of 12 contents wrote all 288 records at its end); else plain."""
        if not self.reuses_cache():
            return plain_batches(chunk, self.plan.batch_size)
        per_batch = max(1, REUSE_TOKENS // max(1, self.plan.longest))
        contents = list(dict.fromkeys(it.content_id for it in chunk))  # in the stream's order
        out = []
        for variant in sorted({it.variant for it in chunk}):
            for start in range(0, len(contents), per_batch):
                these = set(contents[start : start + per_batch])
                out.append([it for it in by_offset(chunk) if it.variant == variant and it.content_id in these])
        return out

    def score(self, items: list[ProbeItem]) -> list[dict]:
        results = None
        if self.reuses_cache() and self.plan.single_token:
            results = score_group(self.session, items, self.plan.step, self.plan.align)
        elif self.reuses_cache():
            results = score_long(self.session, items, self.plan.step, self.plan.align)
        return results if results is not None else self._plain(items)

    def _plain(self, items: list[ProbeItem]) -> list[dict]:
        ordered = by_offset(items)
        batches = plain_batches(ordered, self.plan.batch_size)
        results = [r for batch in batches for r in score_items(self.logits_where, batch)]
        by_key = {item_key(it): r for it, r in zip(ordered, results, strict=True)}
        return [by_key[item_key(it)] for it in items]

    def cost(self, records: int, sequences: int, candidates: int, prefixes: int = 0) -> dict:
        if self.reuses_cache():  # one pass per record at most: a content's shared prefix is read once
            return {"forward_passes_at_most": records}
        return super().cost(records, sequences, candidates)


def from_callable(
    fn,
    vocab_size: int | None = None,
    step: int | None = None,
    align: int = 0,
    window: int | None = None,
    local: int | None = None,
) -> LogitsBackend:
    """Any ``input_ids (LongTensor[B,T]) -> logits (FloatTensor[B,T,V])`` callable; ``step`` etc.
    its compression geometry when it has one, ``local`` its raw window L (probes then keep the
    needle beyond it). A phasescope ``Decoder`` is better passed to ``phasescope.sweep`` itself
    (it then brings its geometry and a cache)."""
    geometry = ModelGeometry(step, window, align, local, "the callable's arguments") if step else ModelGeometry()
    if not step and local is not None:
        geometry = ModelGeometry(local=local, source="the callable's arguments")
    info = ModelInfo(vocab_size=vocab_size, geometry=geometry, description=callable_name(fn), callable_only=True)
    return LogitsBackend(info, checked_logits(fn, info), module=fn if isinstance(fn, torch.nn.Module) else None)


def checked_logits(fn, info: ModelInfo):
    """``fn`` whose output is checked before it is read: a torch tensor of logits [B, T, V] for
    input_ids [B, T], V covering every id the sweep reads (``info.vocab_size`` when known) -- a
    numpy array, [B, V] or too few logits would otherwise fail deep in the scoring."""

    def call(ids: torch.Tensor) -> torch.Tensor:
        out = fn(ids)
        name = callable_name(fn)
        if not isinstance(out, torch.Tensor):
            fix = " (torch.from_numpy(...))" if type(out).__module__.startswith("numpy") else ""
            raise InputError(
                f"the model callable {name} returned a {type(out).__name__}; it must return a torch tensor of logits "
                f"[B, T, V]{fix}"
            )
        if out.dim() != 3 or tuple(out.shape[:2]) != tuple(ids.shape):
            raise InputError(
                f"the model callable {name} returned logits of shape {tuple(out.shape)} for input_ids of shape "
                f"{tuple(ids.shape)}; it must return [B, T, V]: one row of V logits per position"
            )
        needed = max(info.vocab_size or 0, int(ids.max()) + 1)
        if out.shape[-1] < needed:
            raise InputError(
                f"the model callable {name} returned logits over {out.shape[-1]} tokens, but the sweep reads token ids "
                f"up to {needed - 1}: its vocabulary must cover the task's (or pass vocab_size)"
            )
        return out

    return call


def callable_name(fn) -> str:
    """How reports name a callable: ``module.name`` of a function or class (an object's default
    repr carries its memory address, different in every run; a module's is its whole architecture),
    its own repr where its class wrote one."""
    if hasattr(fn, "__qualname__"):
        return f"{fn.__module__}.{fn.__qualname__}"
    cls = type(fn)
    if cls.__repr__ is object.__repr__ or isinstance(fn, torch.nn.Module):
        return f"{cls.__module__}.{cls.__qualname__}"
    return repr(fn)[:80]


PAD_ID = 0


def generate_logits(logits_where, items: list[ProbeItem]) -> list[list[int]]:
    """Greedy decoding, a step for every running item at once: the logits only at each one's last position."""
    import torch

    outputs: list[list[int]] = [[] for _ in items]
    running = list(range(len(items)))
    while running:
        sequences = [items[i].input_ids + outputs[i] for i in running]
        width = max(len(s) for s in sequences)
        ids = torch.full((len(sequences), width), PAD_ID, dtype=torch.long)
        for row, seq in enumerate(sequences):
            ids[row, : len(seq)] = torch.tensor(seq)
        last = sorted({len(s) - 1 for s in sequences})
        with torch.no_grad():
            logits = logits_where(ids, torch.tensor(last))
        for row, i in enumerate(running):
            outputs[i].append(int(logits[row, last.index(len(sequences[row]) - 1)].float().argmax()))
        running = [i for i in running if not _finished(items[i], outputs[i])]
    return outputs


def _finished(item: ProbeItem, generated: list[int]) -> bool:
    return len(generated) >= item.generate.max_tokens or item.generate.done(generated)
