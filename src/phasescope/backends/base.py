"""Backends turn a model into ``input_ids [B,T] -> logits [B,T,V]`` plus what it knows about
its own compression geometry. One base class, one file per backend, a registry keyed by the
model spec's prefix (``hf:``, a phasescope directory, ...): DESIGN.md §4."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import torch

from phasescope.errors import InputError

LogitsFn = Callable[[torch.Tensor], torch.Tensor]
DTYPES = ("float32", "bfloat16", "float16")


@dataclass
class LoadedModel:
    logits: LogitsFn | None  # None for a served model, which scores whole items (``score``)
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
    max_len: int | None = None  # longest sequence the model accepts (None: unknown)
    score: Callable | None = None  # items -> results, for backends without local logits (served models)
    prefix_session: object | None = None  # prefill(ids) -> state; extend(state, ids, start) -> logits (run.prefix)
    module: object | None = None  # the torch module behind ``logits`` when it lives here (head ablation hooks it)


@dataclass(frozen=True)
class BackendOptions:
    """What a user may say about how to load a model (CLI options of `sweep`)."""

    dtype: str = "float32"
    device: str = "cpu"
    trust_remote_code: bool = False
    compress: str = "none"  # hf: post-hoc compression, e.g. mean:s=4,w=4,L=128 (phasescope.kv.posthoc)
    tokenizer: str | None = None  # openai: the model's tokenizer directory (prompts are sent as ids)
    concurrency: int = 8  # openai: requests in flight
    timeout: float = 120.0  # openai: seconds per request
    retries: int = 4  # openai: retries after a 5xx answer, a dropped connection or unreadable JSON
    backoff: float = 1.0  # openai: seconds before the first retry, doubled each time
    api_key_env: str = "OPENAI_API_KEY"  # openai: environment variable holding the key (never stored)

    def __post_init__(self) -> None:
        from phasescope.kv.posthoc import parse_compress

        parse_compress(self.compress)  # refuses a bad scheme before any model loads
        if self.concurrency < 1 or self.retries < 0 or not self.timeout > 0 or self.backoff < 0:
            raise InputError("--concurrency >= 1, --retries >= 0, --timeout > 0 and backoff >= 0 are required")
        if self.dtype not in DTYPES:
            raise InputError(f"--dtype {self.dtype!r} is invalid; allowed: {' | '.join(DTYPES)}")
        try:
            torch.device(self.device)
        except RuntimeError:
            raise InputError(f"--device {self.device!r} is not a torch device (e.g. cpu, cuda, cuda:1, mps)") from None

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)


class Backend:
    """A kind of model spec. ``prefix``: the spec starts with it (empty: a bare path)."""

    name: ClassVar[str]
    prefix: ClassVar[str]
    summary: ClassVar[str]
    example: ClassVar[str]

    def load(self, spec: str, options: BackendOptions) -> LoadedModel:
        raise NotImplementedError


def load_tokenizer(spec: str):
    """A tokenizer by name (``deepseek-v4``, ``qwen3``) or from a local directory; never downloads."""
    from phasescope.backends.tokenizers import load_tokenizer as load

    return load(spec)
