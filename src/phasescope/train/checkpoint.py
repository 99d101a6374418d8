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
from phasescope.rundir.files import atomic_write_text


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
    try:
        tmp.mkdir()
        save_model(model, str(tmp / "model.safetensors"))
        torch.save(optimizer.state_dict(), tmp / "optimizer.pt")
        (tmp / "state.json").write_text(json.dumps({**state, "step": step}, indent=2))
        if model_config is not None:
            (tmp / "model_config.json").write_text(json.dumps(model_config, indent=2))
    except (OSError, RuntimeError) as err:  # a full disk reaches torch.save as a RuntimeError
        shutil.rmtree(tmp, ignore_errors=True)
        kept = (root / "LATEST").read_text().strip() if (root / "LATEST").is_file() else None
        raise CheckpointError(
            f"could not write checkpoint {final} ({_reason(err)}); it was removed"
            + (f", and {root / kept} is intact" if kept else "")
            + ": free space (or fix the permissions) and continue with --resume"
        ) from None
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
        optimizer_state = torch.load(path / "optimizer.pt", weights_only=True)
    except pickle.UnpicklingError:  # never pass on torch's advice to load it unsafely
        raise CheckpointError(
            f"{path / 'optimizer.pt'} holds objects a weights-only load refuses: it was not written by phasescope "
            f"or was altered, and it is not loaded; delete {path} to resume from an earlier checkpoint"
        ) from None
    except (OSError, SafetensorError, RuntimeError, ValueError, EOFError) as err:
        raise CheckpointError(
            f"checkpoint {path} is corrupt or truncated ({type(err).__name__}); delete {path} to resume from an "
            "earlier checkpoint"
        ) from None
    try:
        optimizer.load_state_dict(optimizer_state)
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise CheckpointError(
            f"{path / 'optimizer.pt'} does not fit this model's optimizer ({type(err).__name__}); delete {path} to "
            "resume from an earlier checkpoint"
        ) from None
    return state


def checked_step(path: Path, state: dict, total_steps: int) -> int:
    """The step a checkpoint resumes from: state.json's, refused unless it is the N of its
    directory ``step-N`` and within the recipe's steps."""
    step = state.get("step")
    named = int(path.name.split("-")[1]) if re.fullmatch(r"step-\d+", path.name) else None
    if not isinstance(step, int) or isinstance(step, bool) or step != named or not 0 < step <= total_steps:
        raise CheckpointError(
            f"{path / 'state.json'} says step {step!r}, but the checkpoint is {path.name} of a {total_steps}-step "
            f"recipe: it was altered or belongs to another run; delete {path} to resume from an earlier checkpoint"
        )
    return step


def check_optimizer_steps(path: Path, optimizer, expected: int) -> None:
    """The optimizer's own step count (Adam's per-parameter ``step``) must be the checkpoint's."""
    counts = {float(s["step"]) for s in optimizer.state.values() if "step" in s}
    if counts and counts != {float(expected)}:
        found = ", ".join(f"{c:g}" for c in sorted(counts))
        raise CheckpointError(
            f"{path / 'optimizer.pt'} has taken {found} optimizer steps where {path.name} needs {expected}: the "
            f"optimizer state belongs to another checkpoint; delete {path} to resume from an earlier checkpoint"
        )


def _reason(err: Exception) -> str:
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    text = str(err)
    return "no space left on the device" if "unexpected pos" in text or "No space" in text else type(err).__name__
