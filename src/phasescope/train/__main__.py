"""``torchrun --nproc_per_node=N -m phasescope.train RECIPE [--set k=v ...] --out DIR [--resume]``."""

from phasescope.cli import app

if __name__ == "__main__":
    app(["train", *__import__("sys").argv[1:]])
