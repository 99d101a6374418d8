"""Prefix reuse: in a shift-needle sweep the prompts of one content share every token before
the needle's earliest position, so the model reads that prefix once per content and every
offset continues from a copy of its cache.

The shared prefix is cut at the last compression-window boundary (a position where a new
window starts), so the entries it completed are the entries a full forward pass computes;
phasescope's own decoder continues exactly from any position anyway (decode == parallel is
tested), and a plain transformers cache is exact by construction. Used for single-token
candidates (kv-retrieval); other items are scored as usual.

Shape legend: B contents, P shared prefix tokens, S suffix tokens, V vocabulary.
"""

from __future__ import annotations

import numpy as np
import torch

from phasescope.probes.base import ProbeItem
from phasescope.run.scoring import refuse_broken, results_from_next_token


def common_prefix(sequences: list[list[int]]) -> int:
    first = sequences[0]
    length = min(len(s) for s in sequences)
    for seq in sequences[1:]:
        diff = np.flatnonzero(np.asarray(first[:length]) != np.asarray(seq[:length]))
        length = int(diff[0]) if len(diff) else length
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
        logits = session.extend(state, suffix, prefix_len).float()
        for i, it in enumerate(row):
            last = logits[i, it.answer_pos - 1 - prefix_len]
            refuse_broken(last, it)
            dists[id(it)] = torch.log_softmax(last, dim=-1)
    return results_from_next_token(items, [dists[id(it)] for it in items])
