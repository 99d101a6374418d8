"""A phasescope model directory (``phasescope train`` output) or an in-memory callable."""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import torch

from phasescope.backends.base import Backend, BackendOptions, LoadedModel, load_tokenizer
from phasescope.errors import InputError
from phasescope.kv.cache import KVCache
from phasescope.model.decoder import Decoder
from phasescope.model.load import load_model_dir
from phasescope.runfiles import read_json


def fingerprint_files(paths: list[Path]) -> str:
    """Digest of the weights' bytes (every shard, in name order): the same weights reached by
    any path give the same fingerprint, changed weights a different one."""
    if not paths:
        return ""
    digest = hashlib.sha256()
    for path in sorted(paths, key=lambda p: p.name):
        digest.update(path.name.encode())
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()[:16]


def from_decoder(
    model: Decoder,
    fingerprint: str = "",
    task: dict | None = None,
    description: str = "",
    options: BackendOptions | None = None,
) -> LoadedModel:
    compressed = [layer for layer in model.cfg.layers if layer.compressed]
    geometry = compressed[0] if compressed else None
    options = options or BackendOptions()
    model = model.to(device=options.device, dtype=options.torch_dtype)

    def logits(ids: torch.Tensor) -> torch.Tensor:
        return model(ids.to(options.device)).float().cpu()

    return LoadedModel(
        logits=logits,
        prefix_session=DecoderSession(model, options.device),
        vocab_size=model.cfg.vocab_size,
        step=geometry.step if geometry else None,
        align=geometry.align if geometry else 0,
        window=geometry.window if geometry else None,
        local=max(layer.local for layer in compressed) if compressed else None,
        fingerprint=fingerprint,
        task=task,
        description=description,
        module=model,
    )


class DecoderSession:
    """Prefix reuse (run.prefix) for phasescope's decoder: its cache continues exactly from any position."""

    def __init__(self, model: Decoder, device: str):
        self.model, self.device = model, device

    def prefill(self, ids: torch.Tensor) -> KVCache:
        return self.advance(None, ids, 0)[1]

    def extend(self, cache: KVCache, ids: torch.Tensor, start: int, keep: torch.Tensor | None = None) -> torch.Tensor:
        return self.advance(cache, ids, start, keep)[0]

    def advance(self, cache: KVCache | None, ids: torch.Tensor, start: int, keep: torch.Tensor | None = None):
        """(logits [B,S or len(keep),V], the cache after ``ids``); ``cache`` itself is left as it was."""
        cache = self.model.new_cache() if cache is None else copy.deepcopy(cache)
        with torch.no_grad():
            logits = self.model(ids.to(self.device), start, cache, logits_at=keep)
        return logits.cpu(), cache


def read_task(path: str | Path) -> dict | None:
    """The retrieval task a `phasescope train` directory was trained on (None without a train_config.json)."""
    train_cfg = Path(path) / "train_config.json"
    if not train_cfg.exists():
        return None
    task = read_json(train_cfg, "train config").get("task")
    if not isinstance(task, dict):
        raise InputError(f"{train_cfg} has no task; it was not written by `phasescope train`, or was edited")
    return task


def load_native(path: str | Path, options: BackendOptions | None = None) -> LoadedModel:
    path = Path(path)
    model = load_model_dir(path)
    task = read_task(path)
    fingerprint = fingerprint_files([path / "model.safetensors"])
    if options is not None and options.dtype != "float32":
        fingerprint += f"+dtype:{options.dtype}"
    return from_decoder(model, fingerprint, task, f"phasescope model {path}", options)


def from_callable(
    fn,
    vocab_size: int | None = None,
    step: int | None = None,
    align: int = 0,
    window: int | None = None,
    local: int | None = None,
) -> LoadedModel:
    """Any ``input_ids (LongTensor[B,T]) -> logits (FloatTensor[B,T,V])`` callable; ``local`` is
    its raw window L (probes then keep the needle beyond it)."""
    if isinstance(fn, Decoder):
        return from_decoder(fn)
    return LoadedModel(
        logits=fn,
        vocab_size=vocab_size,
        step=step,
        align=align,
        window=window,
        local=local,
        description=repr(fn)[:80],
        module=fn if isinstance(fn, torch.nn.Module) else None,
    )


class NativeBackend(Backend):
    name = "phasescope"
    prefix = ""
    summary = "a directory written by `phasescope train` (model.safetensors + model_config.json)"
    example = "runs/s4"

    def load(self, spec: str, options: BackendOptions) -> LoadedModel:
        path = Path(spec)
        if not path.exists():
            raise InputError(f"model directory {spec!r} does not exist")
        if not (path / "model_config.json").exists():
            raise InputError(
                f"model spec {spec!r} is not a phasescope model directory (no model_config.json there); "
                "pass the --out directory of `phasescope train`, or hf:DIR for a local transformers model"
            )
        if options.compress != "none":
            raise InputError("--compress is for hf: models; a phasescope model has its own compression scheme")
        loaded = load_native(path, options)
        if options.tokenizer:  # text probes on a model trained with this tokenizer's ids
            loaded.tokenizer = load_tokenizer(options.tokenizer)
            loaded.bos_id = loaded.tokenizer.bos_token_id
        return loaded
