"""Score probe items from a logits function: whether greedy decoding reproduces the target,
and the teacher-forced log-prob of every candidate (the logits backend's plain path).

Shape legend: B sequences in a batch, T tokens, V vocabulary.
"""

from __future__ import annotations

import numpy as np
import torch

from phasescope.errors import InputError
from phasescope.probes.base import ProbeItem

PAD_ID = 0  # right padding; a causal model's logits before the padding are unaffected


def _forward(logits_fn, sequences: list[list[int]], items: list[ProbeItem]) -> torch.Tensor:
    """Right-pad to one length and run the model: log-probs [B,T,V] (float32)."""
    width = max(len(s) for s in sequences)
    padded = np.full((len(sequences), width), PAD_ID, dtype=np.int64)
    for i, seq in enumerate(sequences):
        padded[i, : len(seq)] = seq
    ids = torch.from_numpy(padded)
    with torch.no_grad():
        logits = logits_fn(ids).float()
    for row, seq in enumerate(sequences):  # only the prompt's own positions count, not the padding
        refuse_broken(logits[row, : len(seq)], items[min(row * len(items) // len(sequences), len(items) - 1)])
    return torch.log_softmax(logits, dim=-1)


def refuse_broken(logits: torch.Tensor, item: ProbeItem) -> None:
    """InputError when logits hold NaN or +inf (-inf is a masked token, which is allowed)."""
    if torch.isnan(logits).any() or torch.isposinf(logits).any():
        raise InputError(
            f"the model returned NaN or infinite logits (content {item.content_id}, offset {item.offset}); "
            "its weights or inputs are broken, so no record is written"
        )


def score_items(logits_fn, items: list[ProbeItem]) -> list[dict]:
    """One result per item: greedy, logprob_target, logprobs {candidate: log-prob}."""
    if single_token(items):  # every candidate is read from the distribution after the prompt
        logp = _forward(logits_fn, [item.input_ids for item in items], items)
        return results_from_next_token(items, [logp[i, item.answer_pos - 1] for i, item in enumerate(items)])
    sequences, owners = [], []
    for i, item in enumerate(items):
        for name, tokens in item.candidates.items():
            sequences.append(item.input_ids + tokens)
            owners.append((i, name))
    logp = _forward(logits_fn, sequences, items)
    scores: list[dict] = [{} for _ in items]
    greedy = [False] * len(items)
    for row, (i, name) in enumerate(owners):
        item, tokens = items[i], items[i].candidates[name]
        at = torch.arange(item.answer_pos - 1, item.answer_pos - 1 + len(tokens))
        wanted = torch.tensor(tokens)
        scores[i][name] = float(logp[row, at, wanted].sum())
        if name == item.target:  # greedy decoding reproduces the answer iff every argmax matches
            greedy[i] = bool((logp[row, at].argmax(-1) == wanted).all())
    return [result(item, scores[i], greedy[i]) for i, item in enumerate(items)]


def single_token(items: list[ProbeItem]) -> bool:
    return all(len(c) == 1 for item in items for c in item.candidates.values())


def results_from_next_token(items: list[ProbeItem], dists: list[torch.Tensor]) -> list[dict]:
    """Results of single-token candidates from each item's next-token log-probs [V]."""
    results = []
    for item, dist in zip(items, dists, strict=True):
        scores = {name: float(dist[tokens[0]]) for name, tokens in item.candidates.items()}
        right = item.candidates[item.target][0]
        results.append(result(item, scores, bool(int(dist.argmax()) == right)))
    return results


def result(item: ProbeItem, scores: dict, greedy: bool) -> dict:
    for name, value in scores.items():
        if not np.isfinite(value):
            raise InputError(
                f"the model gives candidate {name!r} probability 0 (log-prob {value}) for content {item.content_id} "
                f"at offset {item.offset}; a probability of exactly 0 means masked logits: score other candidates"
            )
    return {"greedy": greedy, "logprob_target": scores[item.target], "logprobs": scores}
