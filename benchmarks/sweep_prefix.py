"""Prefix reuse in a shift-needle sweep: the same 24-offset sweep with and without it, in the
same process; reports the speed ratio and the largest log-prob difference.

    .venv/bin/python benchmarks/sweep_prefix.py [--seq-len 1024] [--samples 16]

A tiny-preset decoder (random weights: timing and equality only) with s = w = 4, L = 64, on a
retrieval task whose rows are --seq-len tokens; the needle sits at depth 50%.
"""

from __future__ import annotations

import argparse
import time

import torch

import phasescope
from phasescope.data.retrieval import RetrievalTask
from phasescope.kv import scheme
from phasescope.model import Decoder, preset


def timed(model, task, samples: int, reuse: bool) -> tuple[float, list]:
    start = time.perf_counter()
    result = phasescope.sweep(model, task=task, samples=samples, batch_size=16, local=64, prefix_reuse=reuse)
    return time.perf_counter() - start, result.records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run, smallest sizes")
    args = parser.parse_args()
    if args.quick:
        args.seq_len, args.samples, args.repeats = 256, 2, 1
    n_pairs = (args.seq_len - 200) // 6
    task = RetrievalTask(n_keys=256, n_values=64, n_pairs=n_pairs, min_distance=64, seq_len=args.seq_len)
    torch.manual_seed(0)
    model = Decoder(preset("tiny", task.vocab_size, scheme("tiny-4", local=64))).eval()
    timed(model, task, 2, True)  # warm-up
    plain_s, reuse_s = [], []
    for _ in range(args.repeats):
        seconds, plain = timed(model, task, args.samples, False)
        plain_s.append(seconds)
        seconds, reused = timed(model, task, args.samples, True)
        reuse_s.append(seconds)
    diff = max(abs(a.logprobs[k] - b.logprobs[k]) for a, b in zip(plain, reused, strict=True) for k in a.logprobs)
    plain_t, reuse_t = sorted(plain_s)[len(plain_s) // 2], sorted(reuse_s)[len(reuse_s) // 2]
    print(
        f"{len(plain)} items, rows of {args.seq_len} tokens: plain {plain_t:.2f} s, prefix reuse {reuse_t:.2f} s, "
        f"speed-up {plain_t / reuse_t:.2f}x (median of {args.repeats}); largest log-prob difference {diff:.1e}"
    )


if __name__ == "__main__":
    main()
