"""Score probe items from a logits function: whether greedy decoding reproduces the target,
and the teacher-forced log-prob of every candidate (the logits backend's plain path).

Only the logits read are computed where the model allows it (``logits_where``): a 129K-token
vocabulary over every position of every candidate's sequence would dwarf the model itself.

Shape legend: B sequences in a batch, T tokens, K positions read (their union over the batch),
V vocabulary.
"""

from __future__ import annotations

import numpy as np
import torch

from phasescope.backends.base import greedy_along, result
from phasescope.errors import InputError
from phasescope.probes.base import ProbeItem

PAD_ID = 0  # right padding; a causal model's logits before the padding are unaffected


def _forward(logits_where, sequences: list[list[int]], reads: list[list[int]], items: list[ProbeItem]):
    """Right-pad to one length and run the model, keeping the logits only at the positions read
    (``reads[b]``: the positions sequence b is scored at): (log-probs [B,K,V] float32, the index
    in K of every position read). K is the union of the positions read: a few per batch, not T."""
    width = max(len(s) for s in sequences)
    padded = np.full((len(sequences), width), PAD_ID, dtype=np.int64)
    for i, seq in enumerate(sequences):
        padded[i, : len(seq)] = seq
    kept = sorted({p for positions in reads for p in positions})
    with torch.no_grad():
        logits = logits_where(torch.from_numpy(padded), torch.tensor(kept)).float()
    index = {p: k for k, p in enumerate(kept)}
    for row, positions in enumerate(reads):  # only what this row reads counts, never the padding
        owner = items[min(row * len(items) // len(sequences), len(items) - 1)]
        refuse_broken(logits[row, [index[p] for p in positions]], owner)
    return torch.log_softmax(logits, dim=-1), index


def full_logits(logits_fn):
    """``logits_where`` of a model that only gives every position's logits: all of them, then the kept."""
    return lambda ids, keep: logits_fn(ids)[:, keep]


def refuse_broken(logits: torch.Tensor, item: ProbeItem) -> None:
    """InputError when logits hold NaN or +inf (-inf is a masked token, which is allowed)."""
    if torch.isnan(logits).any() or torch.isposinf(logits).any():
        raise InputError(
            f"the model returned NaN or infinite logits (content {item.content_id}, offset {item.offset}); "
            "its weights or inputs are broken, so no record is written"
        )


def score_items(logits_where, items: list[ProbeItem]) -> list[dict]:
    """One result per item: greedy, logprob_target, logprobs {candidate: log-prob}, answer_ids.
    ``logits_where(ids [B,T], keep [K]) -> logits [B,K,V]`` (``LogitsBackend.logits_where``)."""
    if single_token(items):  # every candidate is read from the distribution after the prompt
        reads = [[item.answer_pos - 1] for item in items]
        logp, index = _forward(logits_where, [item.input_ids for item in items], reads, items)
        return results_from_next_token(items, [logp[i, index[item.answer_pos - 1]] for i, item in enumerate(items)])
    sequences, owners, reads = [], [], []
    for i, item in enumerate(items):
        for name, tokens in item.candidates.items():  # teacher-forced: one sequence per candidate
            sequences.append(item.input_ids + tokens)
            owners.append((i, name))
            reads.append(list(range(item.answer_pos - 1, item.answer_pos - 1 + len(tokens))))
    logp, index = _forward(logits_where, sequences, reads, items)
    scores: list[dict] = [{} for _ in items]
    answers: list[list[int]] = [[] for _ in items]
    steps: list[list] = [[] for _ in items]
    for row, (i, name) in enumerate(owners):
        tokens = items[i].candidates[name]
        at = torch.tensor([index[p] for p in reads[row]])
        per_token = logp[row, at, torch.tensor(tokens)]
        scores[i][name] = float(per_token.sum())
        if name == items[i].target:  # the argmax at each of the target's positions
            tops = [int(t) for t in logp[row, at].argmax(-1)]
            answers[i] = greedy_along(tops, tokens)
            steps[i] = list(zip(per_token.tolist(), tops, strict=True))
    return [result(item, scores[i], answers[i], steps[i]) for i, item in enumerate(items)]


def single_token(items: list[ProbeItem]) -> bool:
    return all(len(c) == 1 for item in items for c in item.candidates.values())


def results_from_next_token(items: list[ProbeItem], dists: list[torch.Tensor]) -> list[dict]:
    """Results of single-token candidates from each item's next-token log-probs [V]."""
    results = []
    for item, dist in zip(items, dists, strict=True):
        scores = {name: float(dist[tokens[0]]) for name, tokens in item.candidates.items()}
        results.append(result(item, scores, [int(dist.argmax())]))
    return results
