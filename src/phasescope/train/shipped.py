"""Where the checkpoints phasescope ships live: ``assets/reproduce/RECIPE-sSEED`` (seed 0 of the
demo's recipes: ``assets/demo``). Training resolves ``init_from=RECIPE`` here; the reproduction
matrix reads the same place."""

from __future__ import annotations

from pathlib import Path

from phasescope.shipped import ASSETS, DEMO  # noqa: F401  (re-exported: where training and the matrix look)

# seed 0 of these recipes is the demo's model (shipped once, in assets/demo)
SHIPPED_MANIFEST = "manifest.json"  # a shipped checkpoint's recipe, overrides, command and final evaluation
DEMO_SEED0 = {"tiny-s4": "tiny-s4", "tiny-full": "tiny-full", "hf-deepseek-v4-tiny": "deepseek-v4-tiny"}


def checkpoint_dir(root: Path, recipe: str, seed: int, hf: bool = False) -> Path:
    """Where (recipe, seed) lives under ``root``: ``RECIPE-sSEED`` (transformers models: its hf/)."""
    base = root / f"{recipe}-s{seed}"
    if not base.exists() and root == ASSETS and seed == 0 and recipe in DEMO_SEED0:
        return DEMO / DEMO_SEED0[recipe]
    return base / "hf" if hf and (base / "hf").exists() else base
