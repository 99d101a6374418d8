"""Model backends: phasescope checkpoints and in-memory callables (more arrive with the backends issue)."""

from phasescope.backends.base import LoadedModel
from phasescope.backends.native import from_callable, load_native
from phasescope.errors import InputError


def load_spec(spec: str) -> LoadedModel:
    """A model spec: a phasescope model directory (the output of `phasescope train`), or
    ``hf:DIR`` for a local transformers directory."""
    from pathlib import Path

    if spec.startswith("hf:"):
        from phasescope.backends.hf import load_hf

        return load_hf(spec[3:])
    path = Path(spec)
    if (path / "model_config.json").exists():
        return load_native(path)
    raise InputError(
        f"model spec {spec!r} is not a phasescope model directory (no model_config.json there); "
        "pass the --out directory of `phasescope train`, or hf:DIR for a local transformers model"
    )


__all__ = ["LoadedModel", "from_callable", "load_native", "load_spec"]
