"""Retrained checkpoints next to the shipped ones: are they the same model?

    python experiments/compare_retrained.py OUT/models      # after `phasescope reproduce --retrain --out OUT`

For every RECIPE-sSEED under the directory that phasescope also ships: whether the weights are
bit-identical, else the largest absolute weight difference, and both held-out accuracies (from the
manifest / training log). Training is exactly reproducible only at the same thread count, torch
build and engine code; a checkpoint trained before a change to the engine's floating-point order
differs in its weights while its accuracy may not.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from phasescope.reproduce.matrix import ASSETS, MATRIX, checkpoint_dir, final_eval


def weights_file(model_dir: Path) -> Path:
    return model_dir / "model.safetensors"


def compare(retrained: Path, shipped: Path) -> str:
    a, b = load_file(weights_file(retrained)), load_file(weights_file(shipped))
    if a.keys() != b.keys():
        return "different parameters"
    if all(torch.equal(a[k], b[k]) for k in a):
        return "bit-identical"
    return f"max abs diff {max(float((a[k] - b[k]).abs().max()) for k in a):.2g}"


def main(root: Path) -> None:
    print("| model | weights | held-out accuracy retrained | shipped |")
    print("| --- | --- | --- | --- |")
    for entry in MATRIX:
        for seed in range(3):
            retrained, shipped = checkpoint_dir(root, entry, seed), checkpoint_dir(ASSETS, entry, seed)
            if not (weights_file(retrained).exists() and weights_file(shipped).exists()):
                continue
            mine, theirs = final_eval(retrained), final_eval(shipped)
            print(
                f"| {entry.recipe} s{seed} | {compare(retrained, shipped)} | "
                f"{100 * mine['eval_accuracy']:.2f}% | {100 * theirs['eval_accuracy']:.2f}% |"
            )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
