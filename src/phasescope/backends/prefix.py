"""Prefix reuse: in a shift-needle sweep the prompts of one content share every token before
the needle's earliest position, so the model reads that prefix once per content and every
offset continues from a copy of its cache.

The shared prefix is cut at the last compression-window boundary (a position where a new
window starts), so the entries it completed are the entries a full forward pass computes;
phasescope's own decoder continues exactly from any position anyway (decode == parallel is
tested), and a plain transformers cache is exact by construction. Single-token candidates
(``score_group``) are read from the distribution after the prompt; multi-token candidates of
long prompts (``score_long``) each continue from a copy of the cache after the whole prompt,
so a 128K-token prompt is read once per offset, not once per candidate.

Sessions: ``prefill(ids [B,P]) -> state``; ``extend(state, ids [B,S], start, keep=None) ->
logits [B,S or len(keep),V]`` leaves ``state`` as it was; ``advance(state, ids, start, keep)
-> (logits, state after ids)`` too.

Shape legend: B contents, P shared prefix tokens, S suffix tokens, V vocabulary.
"""

from __future__ import annotations

import torch

from phasescope.backends.base import greedy_along, result
from phasescope.backends.scoring import refuse_broken, results_from_next_token
from phasescope.probes.base import ProbeItem
from phasescope.probes.padding import common_length


def common_prefix(sequences: list[list[int]]) -> int:
    length = min(len(s) for s in sequences)
    for seq in sequences[1:]:
        length = common_length(sequences[0][:length], seq)
    return length


def shared_length(items: list[ProbeItem], step: int, align: int) -> int:
    """Prefix length every content of the group shares across its offsets, cut to the start of a window."""
    by_content: dict = {}
    for item in items:
        by_content.setdefault(item.content_id, []).append(item.input_ids)
    shared = min(common_prefix(seqs) for seqs in by_content.values())
    shared = min(shared, min(it.answer_pos for it in items) - 1)  # at least one token left to read
    return shared - (shared - align) % step if shared > align else 0


def score_group(session, items: list[ProbeItem], step: int, align: int) -> list[dict] | None:
    """Results in the order of ``items`` (one variant, several contents x offsets), or None when
    the group has nothing to share."""
    prefix_len = shared_length(items, step, align)
    if prefix_len < 1:
        return None
    contents = sorted({it.content_id for it in items}, key=lambda c: (type(c).__name__, c))
    first = {c: next(it for it in items if it.content_id == c) for c in contents}
    state = session.prefill(torch.tensor([first[c].input_ids[:prefix_len] for c in contents]))
    dists: dict[int, torch.Tensor] = {}
    for offset in sorted({it.offset for it in items}):
        row = [next(it for it in items if it.content_id == c and it.offset == offset) for c in contents]
        width = max(len(it.input_ids) for it in row) - prefix_len
        suffix = torch.zeros(len(row), width, dtype=torch.long)  # right padding: never shifts a position
        for i, it in enumerate(row):
            suffix[i, : len(it.input_ids) - prefix_len] = torch.tensor(it.input_ids[prefix_len:])
        wanted = sorted({it.answer_pos - 1 - prefix_len for it in row})  # only these logits are computed
        logits = session.extend(state, suffix, prefix_len, keep=torch.tensor(wanted)).float()
        for i, it in enumerate(row):
            last = logits[i, wanted.index(it.answer_pos - 1 - prefix_len)]
            refuse_broken(last, it)
            dists[id(it)] = torch.log_softmax(last, dim=-1)
    return results_from_next_token(items, [dists[id(it)] for it in items])


def score_long(session, items: list[ProbeItem], step: int, align: int) -> list[dict]:
    """Results in the order of ``items``, one content at a time: the content's shared prefix is
    read once, each offset's rest of the prompt once (logits kept only at its last position),
    and each candidate continues from a copy of the cache after the prompt: log-prob = sum of
    its tokens' log-probs; greedy = greedy decoding reproduces the target's tokens."""
    by_content: dict = {}
    for item in items:
        by_content.setdefault(item.content_id, []).append(item)
    results: dict[int, dict] = {}
    for group in by_content.values():
        prefix_len = shared_length(group, step, align)
        state = session.prefill(torch.tensor([group[0].input_ids[:prefix_len]])) if prefix_len else None
        for item in group:
            results[id(item)] = _score_one(session, state, prefix_len, item)
    return [results[id(it)] for it in items]


def _score_one(session, state, prefix_len: int, item: ProbeItem) -> dict:
    rest = torch.tensor([item.input_ids[prefix_len:]])
    last = torch.tensor([rest.shape[1] - 1])
    logits, after = session.advance(state, rest, prefix_len, keep=last)  # state None: prefix_len is 0
    first = logits[0, -1].float()
    refuse_broken(first, item)
    first = torch.log_softmax(first, dim=-1)
    scores, answer, along = {}, [], None
    for name, tokens in item.candidates.items():
        steps = [first]
        if len(tokens) > 1:
            more = session.extend(after, torch.tensor([tokens[:-1]]), len(item.input_ids)).float()[0]
            refuse_broken(more, item)
            steps += list(torch.log_softmax(more, dim=-1))
        scores[name] = float(sum(dist[t] for dist, t in zip(steps, tokens, strict=True)))
        if name == item.target:
            tops = [int(dist.argmax()) for dist in steps]
            answer = greedy_along(tops, tokens)
            along = [(float(dist[t]), top) for dist, t, top in zip(steps, tokens, tops, strict=True)]
    return result(item, scores, answer, along)
