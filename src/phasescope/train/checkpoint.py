"""Checkpoints: weights in safetensors, configs in JSON, optimizer state loaded weights-only.

Layout of a run directory::

    OUT/train_config.json      the recipe after --set edits
    OUT/log.jsonl              one line per logged step / evaluation
    OUT/checkpoints/step-N/    model.safetensors, state.json, optimizer.pt
    OUT/checkpoints/LATEST     name of the newest complete checkpoint
    OUT/model.safetensors      final weights + OUT/model_config.json (what the sweep loads)

A checkpoint is written to ``step-N.tmp`` and renamed when complete; LATEST is replaced
atomically afterwards, so an interrupted write never leaves a half checkpoint behind LATEST.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import shutil
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_model, save_model

from phasescope.errors import CheckpointError
from phasescope.runfiles import atomic_write_text


def save_checkpoint(
    out: Path,
    step: int,
    model: torch.nn.Module,
    optimizer,
    state: dict,
    keep: int = 2,
    model_config: dict | None = None,
) -> Path:
    """``model_config``: the decoder's config, written beside the weights so the checkpoint is a
    model directory `phasescope sweep --model RUN/checkpoints/step-N` can load."""
    root = out / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step}"
    tmp = root / f"step-{step}.tmp"
    if tmp.is_symlink():  # a planted link: removed, never written through
        tmp.unlink()
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    save_model(model, str(tmp / "model.safetensors"))
    torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
    (tmp / "state.json").write_text(json.dumps({**state, "step": step}, indent=2))
    if model_config is not None:
        (tmp / "model_config.json").write_text(json.dumps(model_config, indent=2))
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    atomic_write_text(root / "LATEST", final.name)
    ours = [p for p in root.iterdir() if p.is_dir() and re.fullmatch(r"step-\d+", p.name)]  # not a stray step-old
    for old in sorted(ours, key=lambda p: int(p.name.split("-")[1]))[:-keep]:
        if old.name != final.name:
            shutil.rmtree(old, ignore_errors=True)
    return final


def load_checkpoint(path: Path, model: torch.nn.Module, optimizer) -> dict:
    """Restore weights and optimizer state in place; returns state.json."""
    try:
        state = json.loads((path / "state.json").read_text())
        load_model(model, str(path / "model.safetensors"), strict=True)
        optimizer.load_state_dict(torch.load(path / "optimizer.pt", weights_only=True))
    except (OSError, SafetensorError, RuntimeError, ValueError, EOFError, pickle.UnpicklingError) as err:
        raise CheckpointError(f"checkpoint {path} is corrupt or truncated ({type(err).__name__}: {err})") from None
    return state
