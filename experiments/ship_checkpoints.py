"""Copy finished training runs into the package's reproduction checkpoints, each with its manifest.

    python experiments/ship_checkpoints.py RUN_DIR [RUN_DIR ...]

A RUN_DIR is a `phasescope train RECIPE --set seed=S ... --out RUN_DIR` directory, or a matched
control made by `python -m phasescope.reproduce.matched --seed S --out RUN_DIR`. It is copied to
``src/phasescope/assets/reproduce/RECIPE-sSEED/`` — the final weights and configs (transformers
models: the files of RUN_DIR/hf) and ``manifest.json``: recipe, the --set edits, seed, the command
that retrains it, the commit of this repository, and the final held-out evaluation from log.jsonl.
Checkpoints and optimizer state are not copied.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "src" / "phasescope" / "assets" / "reproduce"
NATIVE_FILES = ("model.safetensors", "model_config.json", "train_config.json")


def manifest(run: Path, config: dict) -> dict:
    from phasescope.train.recipes import get_recipe

    evals = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines() if '"eval_accuracy"' in line]
    last = evals[-1]
    recipe = get_recipe(config["name"])
    keys = ("seed", "steps", "warm_start_steps", "lr", "init_from", "random_align")
    edits = [f"{k}={config[k]}" for k in keys if config.get(k, getattr(recipe, k)) != getattr(recipe, k)]
    edits = ["threads=1", *edits]
    made = {
        "recipe": config["name"],
        "set": edits,
        "seed": config["seed"],
        "command": f"phasescope train {config['name']} " + " ".join(f"--set {e}" for e in edits),
        "commit": _commit(),
        "final_eval": {k: last[k] for k in ("step", "eval_accuracy", "eval_accuracy_by_phase", "eval_loss")},
    }
    if (run / "init_from.json").exists():  # the weights it started from (path relative to this repository)
        init = json.loads((run / "init_from.json").read_text())
        made["init_from"] = {"path": _relative(init["path"]), "sha256": init["sha256"]}
    return made


def _relative(path: str) -> str:
    """A shipped checkpoint as its path in the repository (from any checkout or worktree of it)."""
    marker = "/src/phasescope/assets/"
    return path[path.index(marker) + 1 :] if marker in path else path


def matched_manifest(run: Path) -> dict:
    """tiny-full-matched (``python -m phasescope.reproduce.matched --out RUN``): RUN is already a model
    directory whose manifest.json has the command, the chosen step and the re-measured evaluation."""
    made = json.loads((run / "manifest.json").read_text())
    return made | {"commit": _commit()}


def _commit() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()


def ship(run: Path) -> Path:
    config = json.loads((run / "train_config.json").read_text())
    target = TARGET / f"{config['name']}-s{config['seed']}"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    if (run / "hf").is_dir():
        files = [p for p in (run / "hf").iterdir() if p.is_file()]
    else:
        files = [run / n for n in NATIVE_FILES]
    for path in files:
        shutil.copy(path, target / path.name)
    matched = (run / "manifest.json").exists()
    made = matched_manifest(run) if matched else manifest(run, config)
    (target / "manifest.json").write_text(json.dumps(made, indent=2) + "\n")
    return target


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(ship(Path(arg)))
