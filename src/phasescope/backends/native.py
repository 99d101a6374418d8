"""A phasescope model directory (``phasescope train`` output): its spec, its own load options,
and the checks made before anything loads (the model itself: backends/native_model.py, which
imports torch; an in-memory ``Decoder`` goes there directly)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

from phasescope.backends.options import BackendOptions, device_option, dtype_option, tokenizer_option
from phasescope.errors import InputError
from phasescope.rundir.files import latest_checkpoint

PREFIX = ""  # a bare path
SUMMARY = "a directory written by `phasescope train` (model.safetensors + model_config.json)"
EXAMPLE = "runs/s4"


@dataclass(frozen=True)
class Options(BackendOptions):
    dtype: str = dtype_option()
    device: str = device_option()
    tokenizer: str | None = tokenizer_option()


def unfinished_run(path: Path) -> Path:
    """A training run without its final model is swept at its latest checkpoint (said, once)."""
    checkpoint = None if (path / "model_config.json").exists() else latest_checkpoint(path)
    if checkpoint is None:
        return path
    if not (checkpoint / "model_config.json").exists():
        raise InputError(
            f"{path} is an unfinished training run whose latest checkpoint ({checkpoint.name}) carries no "
            "model_config.json (a transformers-architecture run, or one written before checkpoints did): finish it "
            "with --resume, then sweep its final model"
        )
    warnings.warn(f"{path} is an unfinished training run: sweeping its latest checkpoint, {checkpoint}", stacklevel=2)
    return checkpoint


def load(spec: str, options: Options):
    path = Path(spec)
    if not path.exists():
        raise InputError(f"model directory {spec!r} does not exist")
    path = unfinished_run(path)
    if not (path / "model_config.json").exists() and (path / "train_config.json").exists():
        raise InputError(
            f"{path} is a training run with no final model and no checkpoint yet: continue it with `phasescope train "
            "... --resume`, or sweep it once its first checkpoint is written"
        )
    if not (path / "model_config.json").exists():
        raise InputError(
            f"model spec {spec!r} is not a phasescope model directory (no model_config.json there); "
            "pass the --out directory of `phasescope train`, or hf:DIR for a local transformers model"
        )
    from phasescope.backends.base import check_device, load_tokenizer
    from phasescope.backends.native_model import load_native

    check_device(options.device)
    loaded = load_native(path, options)
    if options.tokenizer:  # text probes on a model trained with this tokenizer's ids
        loaded.info.tokenizer = load_tokenizer(options.tokenizer)
        loaded.info.bos_id = loaded.info.tokenizer.bos_token_id
    return loaded
