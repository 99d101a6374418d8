"""A whole forward of the ``tiny`` model preset at 128K tokens: compressed vs full attention.

Run:  .venv/bin/python benchmarks/long_forward.py [--tokens 131072] [--json FILE]

The model is the demo's: the ``tiny`` preset (2 layers, width 64, 4 query heads on 1 KV head
of 16, MLP 256, token-shift input) with the ``tiny-s4`` recipe's scheme (s = w = 4 scalar
gate, raw window L = 8) in every layer, vs the same model with full attention (torch's fused
causal SDPA); random weights (seed 0), vocabulary of the tiny retrieval task, batch 1,
float32, 2 threads, no_grad (how sweeps score). Each configuration runs in a fresh
subprocess: one warm-up forward at 4096 tokens, then one timed forward at the target length;
peak memory is the rise of the subprocess's max RSS over that forward (weights and input
already there). ``last logit`` asks for the last position's logits only
(``Decoder(ids, logits_at=slice(-1, None))``) instead of all [T, V]. A configuration that
runs past ``--timeout`` seconds or dies (e.g. out of memory) is reported as such.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import time
from pathlib import Path

import torch

from phasescope.kv import CompressionConfig
from phasescope.model import Decoder
from phasescope.model.config import preset
from phasescope.train.recipes import TINY_LOCAL, TINY_TASK

COMPRESSED = CompressionConfig(step=4, window=4, local=TINY_LOCAL, pooler="scalar_gate")
FULL = CompressionConfig(kind="full")
CONFIGS = {
    "full": (FULL, False),
    "compressed": (COMPRESSED, False),
    "compressed, last logit": (COMPRESSED, True),
}


def _child(scheme_dict: dict, last_only: bool, n_tokens: int, queue) -> None:
    torch.set_num_threads(2)
    torch.manual_seed(0)
    model = Decoder(preset("tiny", TINY_TASK.vocab_size, CompressionConfig(**scheme_dict))).eval()
    ids = torch.randint(0, TINY_TASK.vocab_size, (1, n_tokens), generator=torch.Generator().manual_seed(1))
    at = slice(-1, None) if last_only else None
    with torch.no_grad():
        model(ids[:, :4096], logits_at=at)  # warm-up: thread pool, first-call allocations
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        logits = model(ids, logits_at=at)
        seconds = time.perf_counter() - start
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base
    queue.put(dict(seconds=seconds, peak_kib=peak_kib, logits_shape=list(logits.shape)))


def measure(scheme: CompressionConfig, last_only: bool, n_tokens: int, timeout: float) -> dict:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(scheme.to_dict(), last_only, n_tokens, queue))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return dict(status=f"stopped after {timeout:.0f} s (too slow)")
    if proc.exitcode != 0:
        return dict(status=f"died (exit code {proc.exitcode}; -9 is the kernel's out-of-memory kill)")
    return dict(status="ok", **queue.get())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=131072)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per configuration")
    parser.add_argument("--json", help="also store the rows under 'long_forward' in this JSON file (kept otherwise)")
    parser.add_argument("--quick", action="store_true", help="a smoke run, smallest sizes")
    args = parser.parse_args()
    if args.quick:
        args.tokens, args.timeout = 512, 120
    print(f"tiny preset, {args.tokens} tokens, compressed: {COMPRESSED}\n")
    print(f"{'configuration':<24} {'time s':>8} {'peak MiB':>9}  logits")
    rows = []
    for name, (scheme, last_only) in CONFIGS.items():
        row = dict(config=name, tokens=args.tokens, **measure(scheme, last_only, args.tokens, args.timeout))
        rows.append(row)
        if row["status"] == "ok":
            print(f"{name:<24} {row['seconds']:8.1f} {row['peak_kib'] / 1024:9.0f}  {row['logits_shape']}")
        else:
            print(f"{name:<24} {row['status']}")
    ok = {row["config"]: row for row in rows if row["status"] == "ok"}
    if "full" in ok and "compressed" in ok:
        full, comp = ok["full"], ok["compressed"]
        print(
            f"\ncompressed / full: time {comp['seconds'] / max(full['seconds'], 1e-9):.2f}x,"
            f" peak memory {comp['peak_kib'] / max(full['peak_kib'], 1):.2f}x"
        )
    if args.json:
        path = Path(args.json)
        data = json.loads(path.read_text()) if path.exists() else {}
        data["long_forward"] = rows
        path.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
