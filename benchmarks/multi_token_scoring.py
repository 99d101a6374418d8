"""Peak memory of scoring multi-token candidates: the output head at every position (then
sliced, the old path) vs only where read (``LogitsBackend.logits_where``), with the
single-token path as the yardstick, each in a fresh process, same prompts.

Run:  .venv/bin/python benchmarks/multi_token_scoring.py [--tokens 512] [--items 8] [--quick]

A tiny random Qwen3 with Qwen's real 151,669-token vocabulary (logits, not the weights, are the
memory at stake); items of --tokens tokens with four candidates of 1 to 4 tokens.
"""

from __future__ import annotations

import argparse
import multiprocessing
import resource
import tempfile
from pathlib import Path


def _score(path: str, mode: str, tokens: int, items: int, queue, fresh: bool = True) -> None:
    import time

    import numpy as np
    import torch

    from phasescope.backends import load_spec
    from phasescope.backends.scoring import full_logits, score_items
    from phasescope.probes.base import ProbeItem

    if fresh:
        torch.set_num_threads(2)
    backend = load_spec(f"hf:{path}")
    rng = np.random.default_rng(0)
    batch = []
    for i in range(items):
        prompt = [int(t) for t in rng.integers(3, 150000, size=tokens)]
        sizes = (1, 1, 1, 1) if mode == "single-token" else (1, 2, 3, 4)
        candidates = {f"c{k}": [int(t) for t in rng.integers(3, 150000, size=n)] for k, n in enumerate(sizes)}
        batch.append(ProbeItem(i, 0, prompt, candidates, "c0", tokens, tokens, rule="choice"))
    start = time.perf_counter()
    score_items(full_logits(backend.logits) if mode == "every position" else backend.logits_where, batch)
    seconds = time.perf_counter() - start
    queue.put((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, seconds))


def measure(path: str, mode: str, tokens: int, items: int, fresh: bool = True) -> tuple[int, float]:
    """(peak RSS in KiB of the process that loads the model and scores, seconds) in a fresh process;
    ``fresh`` False (--quick): in this one, whose peak RSS says nothing of the mode."""
    if not fresh:
        import queue

        answer = queue.SimpleQueue()
        _score(path, mode, tokens, items, answer, fresh=False)
        return answer.get()
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_score, args=(path, mode, tokens, items, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--items", type=int, default=8)
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: smallest sizes, in this process (no memory reading)"
    )
    args = parser.parse_args()
    if args.quick:
        args.tokens, args.items = 64, 2
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from hf_models import tiny_qwen3
    from phasescope.backends.tokenizers import named_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        path = str(tiny_qwen3(Path(tmp) / "qwen3", named_tokenizer("qwen3")))
        rows = {
            mode: measure(path, mode, args.tokens, args.items, fresh=not args.quick)
            for mode in ("single-token", "every position", "where read")
        }
    base = max(rows["single-token"][0], 1)
    print(f"{args.items} items x 4 candidates, {args.tokens}-token prompts, vocabulary 151,669:")
    for mode, (kib, seconds) in rows.items():
        print(
            f"{mode:>15}: peak RSS {kib / 1024:6.0f} MiB ({kib / base:5.2f}x single-token), scored in {seconds:6.2f} s"
        )


if __name__ == "__main__":
    main()
