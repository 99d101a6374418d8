"""The models phasescope ships, by name: ``--model demo:tiny-s4`` works from any directory (a path
into the source tree works only inside the repository). ``assets/demo`` holds seed 0 of the
demo's recipes; ``assets/reproduce`` the reproduction's other checkpoints (``train/shipped.py``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from phasescope.errors import InputError

ASSETS = Path(__file__).resolve().parent / "assets" / "reproduce"
DEMO = ASSETS.parent / "demo"
PREFIX = "demo:"


TEXT_DEMO = "deepseek-v4-text"  # untrained, built on first use from its config (backends/text_demo.py)


def shipped_names() -> list[str]:
    return sorted([p.name for p in DEMO.iterdir() if p.is_dir()] + [TEXT_DEMO])


def cache_root() -> Path:
    return Path(os.environ.get("PHASESCOPE_CACHE") or Path.home() / ".cache" / "phasescope")


def built_dir(name: str) -> Path:
    """Where a model built on first use lives: per transformers version, whose initialisation it is."""
    from importlib.metadata import version

    return cache_root() / "demo" / f"{name}-transformers-{version('transformers')}"


def expand(spec: str) -> str:
    """``demo:NAME`` as the spec that loads that shipped model: its directory for a phasescope
    model, ``hf:DIRECTORY`` for a transformers export (``hf:demo:NAME`` says so explicitly);
    any other spec unchanged."""
    hf = spec.startswith("hf:" + PREFIX)
    if not (spec.startswith(PREFIX) or hf):
        return spec
    name = spec.split(PREFIX, 1)[1]
    if name == TEXT_DEMO:  # built by the backends on first load (backends/text_demo.py)
        return f"hf:{built_dir(name)}"
    path = DEMO / name
    if not name or name != Path(name).name or not path.is_dir():
        raise InputError(
            f"--model {spec}: phasescope ships no model {name!r}; it ships {', '.join(shipped_names())} "
            f"(e.g. --model {PREFIX}tiny-s4)"
        )
    return f"hf:{path}" if hf or _is_transformers(path) else str(path)


def _is_transformers(path: Path) -> bool:
    config = path / "config.json"
    return config.exists() and "model_type" in json.loads(config.read_text())
