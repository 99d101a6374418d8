"""How much the indexer's KL shares the gradient clip with the language model (amendment 10).

    OMP_NUM_THREADS=1 .venv/bin/python experiments/indexer_gradient_share.py RUN_DIR [RUN_DIR ...]

A RUN_DIR is a `phasescope train hf-deepseek-v4-tiny-topk16 ... --out RUN_DIR` directory. The trainer
clips the gradient of (LM loss + indexer_loss x KL) over all parameters at once. The two losses touch
disjoint parameters (the LM loss gives the indexer nothing; the KL, its inputs detached, trains the
indexer alone), so the clipped LM update is the unclipped one times min(1, clip / |g|), with |g|^2 =
|g_lm|^2 + |w g_kl|^2. Per checkpoint this prints |g_lm|, |w g_kl| and the factor by which the KL's
share shrinks the LM update (min(1, clip/|g|) / min(1, clip/|g_lm|); 1 = no effect), averaged over 4
training batches of the run's own data stream: the one way the sparse recipe's training differs from
its dense control besides the selection itself.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file

from phasescope.data.retrieval import sample_batch
from phasescope.train.config import TrainConfig
from phasescope.train.indexer import IndexerObjective
from phasescope.train.models import build_model
from phasescope.train.trainer import batch_loss, to_torch


def norm(params) -> float:
    return float(torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params if p.grad is not None)))


def share(cfg: TrainConfig, checkpoint: Path, step: int, n_batches: int = 4) -> dict:
    model = build_model(cfg, compressed=True, seed=cfg.seed)
    model.load_state_dict(load_file(checkpoint / "model.safetensors"))
    indexer = [p for n, p in model.named_parameters() if ".indexer." in n]
    rest = [p for n, p in model.named_parameters() if ".indexer." not in n]
    objective = IndexerObjective(model.hf)
    lm, kl, factor = [], [], []
    for k in range(n_batches):
        batch = sample_batch(cfg.task, cfg.batch_size, np.random.default_rng([cfg.seed, step + k]))
        model.zero_grad(set_to_none=True)
        batch_loss(model, *to_torch(batch, slice(None))).backward()
        g_lm = norm(rest)
        model.zero_grad(set_to_none=True)
        batch_loss(model, *to_torch(batch, slice(None)))
        (cfg.indexer_loss * objective.loss()).backward()
        g_kl = norm(indexer)
        total = (g_lm**2 + g_kl**2) ** 0.5
        lm.append(g_lm), kl.append(g_kl)
        factor.append(min(1.0, cfg.grad_clip / total) / min(1.0, cfg.grad_clip / g_lm))
    objective.close()
    return {"step": step, "lm_grad_norm": np.mean(lm), "kl_grad_norm": np.mean(kl), "lm_update_factor": np.mean(factor)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    for run in args.runs:
        cfg = TrainConfig.from_dict(json.loads((run / "train_config.json").read_text()))
        for checkpoint in sorted((run / "checkpoints").glob("step-*"), key=lambda p: int(p.name.split("-")[1])):
            step = int(checkpoint.name.split("-")[1])
            if step % 600:
                continue
            r = share(cfg, checkpoint, step)
            print(
                f"{run.name} step {step}: |g_lm| {r['lm_grad_norm']:.3f}, |w g_kl| {r['kl_grad_norm']:.4f}, "
                f"LM update x {r['lm_update_factor']:.4f}"
            )


if __name__ == "__main__":
    main()
