"""Save a trained transformers model as a HF directory with a tokenizer for its vocabulary."""

from __future__ import annotations

import json
from pathlib import Path

from phasescope.data.vocab import save_tokenizer
from phasescope.train.config import TrainConfig


def export_hf(directory: Path, cfg: TrainConfig, hf_model) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    hf_model.save_pretrained(str(directory), safe_serialization=True)
    save_tokenizer(directory, cfg.task)
    geometry = {
        "step": cfg.scheme.step,
        "window": cfg.scheme.window,
        "align": cfg.scheme.align,
        "local": hf_model.config.sliding_window,
    }
    (directory / "phasescope.json").write_text(
        json.dumps({"compression": geometry, "task": cfg.task.to_dict()}, indent=2)
    )
