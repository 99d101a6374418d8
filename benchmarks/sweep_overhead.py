"""Harness overhead: a full sweep (probe building, checks, batching, scoring, records.jsonl) vs
the bare batched forward passes it needs, in the same run.

Run:  .venv/bin/python benchmarks/sweep_overhead.py [--samples N] [--quick]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import phasescope
from phasescope.assemble import assemble
from phasescope.backends.base import ScoringPlan
from phasescope.demo import ASSETS
from phasescope.run.settings import sweep_settings

OFFSETS = list(range(24))


def bare_forwards(backend, items, batch_size: int) -> float:
    """Time only the model calls on the batches the sweep scores (right-padded with token 0)."""
    backend.prepare(ScoringPlan(4, 0, batch_size, prefix_reuse=False))
    tensors = []
    for batch in backend.batches(items):
        width = max(len(it.input_ids) for it in batch)
        ids = torch.zeros((len(batch), width), dtype=torch.long)
        for i, it in enumerate(batch):
            ids[i, : len(it.input_ids)] = torch.tensor(it.input_ids)
        tensors.append(ids)
    start = time.perf_counter()
    with torch.no_grad():
        for ids in tensors:
            backend.logits(ids)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 8 contents, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.samples, args.repeats = 8, 1
    torch.set_num_threads(2)
    options = dict(samples=args.samples, design="pad-prefix", batch_size=args.batch_size, prefix_reuse=False)
    spec, _ = sweep_settings(str(ASSETS / "tiny-s4"), offsets=OFFSETS, **options)
    prepared = assemble(spec, task=None, tokenizer=None, completion=None)
    items = [it for group in prepared.probe.stream(OFFSETS, args.samples, np.random.default_rng(0)) for it in group]
    bare_forwards(prepared.backend, items[: args.batch_size], args.batch_size)  # warm-up
    rows = []
    for _ in range(args.repeats):
        bare = bare_forwards(prepared.backend, items, args.batch_size)
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            phasescope.sweep(prepared.backend, offsets=OFFSETS, out=Path(tmp) / "run", **options)
            full = time.perf_counter() - start
        rows.append((bare, full))
    bare, full = (float(np.median(x)) for x in zip(*rows, strict=True))
    print(
        f"{len(items)} items, batch {args.batch_size}: bare forwards {bare:.2f} s, whole sweep {full:.2f} s, "
        f"overhead {full / bare - 1:+.1%} (median of {args.repeats})"
    )


if __name__ == "__main__":
    main()
