"""Training throughput: compressed tiny model vs the same model with full attention.

Run:  .venv/bin/python benchmarks/training.py [--steps N]

Both models come from the project's recipes (tiny-s4 compressed, tiny-full control, same
size and task); each is timed over the same number of optimizer steps after warm-up, in the
same process, with 2 threads. Achieved FLOP/s uses the usual 6 x parameters x tokens
estimate (attention score FLOPs excluded) against a matmul peak measured here.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from phasescope.data.retrieval import sample_batch
from phasescope.train.models import build_model
from phasescope.train.recipes import get_recipe
from phasescope.train.trainer import batch_loss, make_optimizer


def matmul_peak_flops(size: int = 1024, repeats: int = 20) -> float:
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    return 2 * size**3 * repeats / (time.perf_counter() - start)


def tokens_per_second(recipe: str, steps: int, warmup: int = 3) -> tuple[float, float]:
    """(tokens/s, model FLOP/s) over ``steps`` optimizer steps after ``warmup`` warm-up steps."""
    cfg = get_recipe(recipe)
    model = build_model(cfg, compressed=True, seed=0)
    optimizer = make_optimizer(cfg, model)
    n_params = sum(p.numel() for p in model.parameters())
    batches = [sample_batch(cfg.task, cfg.batch_size, np.random.default_rng([0, i])) for i in range(steps + warmup)]
    elapsed = 0.0
    for i, batch in enumerate(batches):
        start = time.perf_counter()
        loss = batch_loss(model, torch.from_numpy(batch.input_ids), torch.from_numpy(batch.targets))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if i >= warmup:
            elapsed += time.perf_counter() - start
    tokens = steps * cfg.batch_size * cfg.task.seq_len
    return tokens / elapsed, 6 * n_params * tokens / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=60, help="timed optimizer steps per model")
    parser.add_argument("--json", help="also write the results to this JSON file")
    parser.add_argument("--quick", action="store_true", help="a smoke run, smallest sizes")
    args = parser.parse_args()
    if args.quick:
        args.steps = 1
    warmup = 1 if args.quick else 3
    torch.set_num_threads(2)
    peak = matmul_peak_flops()
    full_tps, full_flops = tokens_per_second("tiny-full", args.steps, warmup)
    comp_tps, comp_flops = tokens_per_second("tiny-s4", args.steps, warmup)
    rows = {
        "matmul_peak_gflops": peak / 1e9,
        "full": {"tokens_per_s": full_tps, "model_gflops": full_flops / 1e9},
        "compressed": {"tokens_per_s": comp_tps, "model_gflops": comp_flops / 1e9},
        "ratio": comp_tps / full_tps,
    }
    print(f"matmul peak here (1024^2 fp32): {peak / 1e9:.1f} GFLOP/s")
    print("model        tokens/s   model GFLOP/s   share of matmul peak")
    for name, tps, flops in (("tiny-full", full_tps, full_flops), ("tiny-s4", comp_tps, comp_flops)):
        print(f"{name:<10} {tps:10.0f} {flops / 1e9:15.2f} {flops / peak:20.1%}")
    print(f"compressed / full tokens/s: {comp_tps / full_tps:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
