"""Harness overhead: a full sweep (probe building, batching, scoring, records.jsonl) vs the
bare batched forward passes it needs, in the same run.

Run:  .venv/bin/python benchmarks/sweep_overhead.py [--samples N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import phasescope
from phasescope.api import build_probe, resolve_model
from phasescope.backends.scoring import PAD_ID
from phasescope.demo import ASSETS
from phasescope.run.orchestrator import _batches


def bare_forwards(model, items, batch_size: int) -> float:
    """Time only the model calls on the same padded batches the sweep scores."""
    items = sorted(items, key=lambda it: (it.offset, it.content_id))
    tensors = []
    for batch in _batches(items, batch_size):
        width = max(len(it.input_ids) for it in batch)
        ids = torch.full((len(batch), width), PAD_ID, dtype=torch.long)
        for i, it in enumerate(batch):
            ids[i, : len(it.input_ids)] = torch.tensor(it.input_ids)
        tensors.append(ids)
    start = time.perf_counter()
    with torch.no_grad():
        for ids in tensors:
            model.logits(ids)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(2)
    model = resolve_model(ASSETS / "tiny-s4")
    probe = build_probe("kv-retrieval", model, design="pad-prefix", task=None, tokenizer=None, completion=None)
    items = probe.items(list(range(24)), args.samples, np.random.default_rng(0))
    bare_forwards(model, items[: args.batch_size], args.batch_size)  # warm-up
    rows = []
    for _ in range(5):
        bare = bare_forwards(model, items, args.batch_size)
        with tempfile.TemporaryDirectory() as tmp:
            start = time.perf_counter()
            phasescope.sweep(
                model, samples=args.samples, design="pad-prefix", out=Path(tmp) / "run", batch_size=args.batch_size
            )
            full = time.perf_counter() - start
        rows.append((bare, full))
    bare, full = (float(np.median(x)) for x in zip(*rows, strict=True))
    print(
        f"{len(items)} items, batch {args.batch_size}: bare forwards {bare:.2f} s, whole sweep {full:.2f} s, "
        f"overhead {full / bare - 1:+.1%} (median of 5)"
    )


if __name__ == "__main__":
    main()
