"""Backends turn a model into ``input_ids [B,T] -> logits [B,T,V]`` plus what it knows about
its own compression geometry."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

LogitsFn = Callable[[torch.Tensor], torch.Tensor]


@dataclass
class LoadedModel:
    logits: LogitsFn
    vocab_size: int | None
    step: int | None = None  # compression step the model's config declares (None: not compressed)
    align: int = 0
    window: int | None = None
    local: int | None = None  # raw local window L of the compressed layers (None: not compressed / unknown)
    fingerprint: str = ""
    task: dict | None = None  # the retrieval task the model was trained on, when known
    description: str = ""
    tokenizer: object | None = None  # for probes written in text (HF models)
    bos_id: int | None = None  # prepended by text probes when the model expects it
