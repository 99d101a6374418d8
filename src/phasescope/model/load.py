"""Load a phasescope model directory (``model.safetensors`` + ``model_config.json``)."""

from __future__ import annotations

from pathlib import Path

from safetensors import SafetensorError
from safetensors.torch import load_model

from phasescope.errors import InputError
from phasescope.limits import refuse_unless_fits
from phasescope.model.config import ModelConfig
from phasescope.model.decoder import Decoder
from phasescope.rundir.files import read_json


def load_model_dir(path: str | Path) -> Decoder:
    path = Path(path)
    config_file, weights = path / "model_config.json", path / "model.safetensors"
    if not config_file.exists() or not weights.exists():
        raise InputError(
            f"{path} is not a phasescope model directory: it needs model_config.json and model.safetensors "
            "(written by `phasescope train` at the end of a run)"
        )
    config = ModelConfig.from_dict(read_json(config_file, "model config"))
    refuse_unless_fits(
        f"{config_file} ({config.n_layers} layers, d_model {config.d_model})",
        8 * config.approx_parameters(),  # float32 weights, built then loaded
        f"a model this size cannot be built here; check that the config is the one written with {weights.name}",
    )
    model = Decoder(config)
    try:
        load_model(model, str(weights), strict=True)
    except (SafetensorError, RuntimeError) as err:
        raise InputError(f"{weights} does not match {config_file} or is corrupt: {err}") from None
    return model.eval()
