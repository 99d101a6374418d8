"""A test-time remedy for phase sensitivity that needs no retraining: the phase ensemble.

Shape legend: B rows, T tokens, V vocabulary, S = step (one copy per pad length).

Every prompt is scored ``step`` times, with j = 0..step−1 pad tokens inserted after its first
token (so everything after it moves j positions: every token visits every phase once), and
the next-token distributions of the copies are averaged position by position:

    p(token at t) = mean_j softmax(logits_j[t + j])      (t >= 1; t = 0 is before the pads)

The result is returned as log-probabilities through the ordinary ``logits`` interface, so every
probe and the whole scoring path work unchanged; records keep the *nominal* phase of the
unpadded prompt. Cost: ``step`` forward passes of T + j tokens instead of one of T.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from phasescope.backends.base import Backend
from phasescope.backends.logits import LogitsBackend
from phasescope.errors import InputError


def pad_token(loaded: Backend, tokenizer=None, task=None) -> int:
    """The token inserted to shift a prompt: the retrieval task's filler (``task`` or the
    model's own) or a newline / space that is one token in the tokenizer."""
    if task is None and loaded.info.task:
        from phasescope.data.retrieval import RetrievalTask

        task = RetrievalTask.from_dict(loaded.info.task)
    if task is not None:
        return int(task.filler_ids[0])
    tokenizer = tokenizer or loaded.info.tokenizer
    if tokenizer is not None:
        for text in ("\n", " ", "."):
            ids = tokenizer.encode(text, add_special_tokens=False)
            if len(ids) == 1:
                return int(ids[0])
    raise InputError(
        "the phase ensemble needs a pad token: this model has neither a task nor a tokenizer that encodes a "
        "newline or space as one token; pass ensemble_pad_id=TOKEN_ID (CLI: --ensemble-pad-id)"
    )


def shifted_copies(ids: torch.Tensor, step: int, pad_id: int) -> list[torch.Tensor]:
    """j = 0..step−1 pad tokens after the first token: [B,T] -> step tensors [B,T+j]."""
    out = []
    for j in range(step):
        pads = torch.full((ids.shape[0], j), pad_id, dtype=ids.dtype)
        out.append(torch.cat([ids[:, :1], pads, ids[:, 1:]], dim=1))
    return out


def combine(logits: list[torch.Tensor], length: int) -> torch.Tensor:
    """Copies' logits [B,T+j,V] -> log of the mean probability per original position, [B,T,V]."""
    aligned = []
    for j, x in enumerate(logits):
        logp = torch.log_softmax(x.float(), dim=-1)
        aligned.append(torch.cat([logp[:, :1], logp[:, 1 + j : length + j]], dim=1))
    return torch.logsumexp(torch.stack(aligned), dim=0) - math.log(len(logits))


def phase_ensemble(loaded: Backend, step: int, pad_id: int) -> LogitsBackend:
    """``loaded`` scored as the average of its ``step`` pad-shifted copies (see the module doc)."""
    if not isinstance(loaded, LogitsBackend):
        raise InputError(
            "the phase ensemble needs the model's logits here; a served model scores whole items (score the "
            "pad-shifted prompts as their own sweep instead: --design pad-prefix)"
        )
    if step < 2:
        raise InputError(f"the phase ensemble needs a compression step >= 2, got {step}")
    vocab = loaded.info.vocab_size
    if not isinstance(pad_id, int) or pad_id < 0 or (vocab is not None and pad_id >= vocab):
        allowed = f"0 .. {vocab - 1}" if vocab is not None else "an id >= 0"
        raise InputError(
            f"--ensemble-pad-id {pad_id} is not a token of this model (its vocabulary: {allowed}); pass an id it has, "
            "or leave it out to use the task's filler or a one-token newline"
        )

    def logits(ids: torch.Tensor) -> torch.Tensor:
        return combine([loaded.logits(x) for x in shifted_copies(ids, step, pad_id)], ids.shape[1])

    info = loaded.info
    info = replace(
        info,
        max_len=None if info.max_len is None else info.max_len - (step - 1),
        fingerprint=f"{info.fingerprint}+phase-ensemble(s={step},pad={pad_id})",
        description=f"{info.description} +phase-ensemble(s={step})",
    )
    return LogitsBackend(info, logits, None, loaded.module)  # the copies are separate sequences: no shared cache
