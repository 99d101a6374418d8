"""A phasescope ``Decoder`` as a backend: one loaded from a model directory (backends/native.py
checks the directory first), or one in memory.

Shape legend: B rows in a batch, T tokens of a whole pass, S tokens one session call reads,
K positions whose logits are kept (``keep``), V vocabulary.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import torch

from phasescope.backends.base import ModelInfo
from phasescope.backends.logits import LogitsBackend
from phasescope.backends.options import BackendOptions
from phasescope.errors import InputError
from phasescope.kv.cache import KVCache
from phasescope.model.decoder import Decoder
from phasescope.model.load import load_model_dir
from phasescope.options import behaviour
from phasescope.rundir.files import read_json
from phasescope.specs import ModelGeometry


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
    *,
    options: BackendOptions,
) -> LogitsBackend:
    """``options``: the phasescope backend's (backends/native.py; its dtype and device)."""
    compressed = [layer for layer in model.cfg.layers if layer.compressed]
    model = model.to(device=options.device, dtype=getattr(torch, options.dtype))

    def logits(ids: torch.Tensor) -> torch.Tensor:  # ids [B,T] -> float32 logits [B,T,V] on the CPU
        return model(ids.to(options.device)).float().cpu()

    # ids [B,T], keep [K] -> logits [B,K,V]: the output head only where read
    def kept(ids: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        return model(ids.to(options.device), logits_at=keep.to(options.device)).float().cpu()

    geometry = ModelGeometry()
    if compressed:
        first, local = compressed[0], max(layer.local for layer in compressed)
        geometry = ModelGeometry(first.step, first.window, first.align, local, "the model's config")
    info = ModelInfo(model.cfg.vocab_size, geometry, fingerprint, task, description)
    return LogitsBackend(info, logits, DecoderSession(model, options.device), model, kept)


class DecoderSession:
    """Prefix reuse (run.prefix) for phasescope's decoder: its cache continues exactly from any position."""

    def __init__(self, model: Decoder, device: str):
        self.model, self.device = model, device

    def prefill(self, ids: torch.Tensor) -> KVCache:  # ids [B,S] -> the cache after them
        return self.advance(None, ids, 0)[1]

    def extend(self, cache: KVCache, ids: torch.Tensor, start: int, keep: torch.Tensor | None = None) -> torch.Tensor:
        return self.advance(cache, ids, start, keep)[0]

    def advance(self, cache: KVCache | None, ids: torch.Tensor, start: int, keep: torch.Tensor | None = None):
        """ids [B,S], keep [K] or None -> (logits [B,S or K,V], the cache after ``ids``); ``cache``
        itself is left as it was."""
        cache = self.model.new_cache() if cache is None else copy.deepcopy(cache)
        with torch.no_grad():
            logits = self.model(ids.to(self.device), start, cache, logits_at=keep)
        return logits.cpu(), cache


def read_task(path: str | Path) -> dict | None:
    """The retrieval task a `phasescope train` directory (or one of its checkpoints) was trained on
    (None without a train_config.json)."""
    path = Path(path)
    run = path.parent.parent if (path / "state.json").exists() and path.parent.name == "checkpoints" else path
    train_cfg = run / "train_config.json"
    if not train_cfg.exists():
        return None
    task = read_json(train_cfg, "train config").get("task")
    if not isinstance(task, dict):
        raise InputError(f"{train_cfg} has no task; it was not written by `phasescope train`, or was edited")
    return task


def load_native(path: str | Path, options: BackendOptions) -> LogitsBackend:
    path = Path(path)
    model = load_model_dir(path)
    task = read_task(path)
    fingerprint = fingerprint_files([path / "model.safetensors"]) + behaviour(options)
    return from_decoder(model, fingerprint, task, f"phasescope model {path}", options=options)
