"""How long a sweep takes to build and check its contents before the first record is scored:
the text kv-retrieval probe on DeepSeek-V4's real tokenizer, every content at every offset
(the first of the sweep's two passes over the probe's stream; the run shows a bar over it).

Run:  .venv/bin/python benchmarks/content_build.py [--contexts 1024,8192] [--samples 12] [--quick]
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def build_seconds(tokenizer, context: int, samples: int, offsets: int) -> tuple[int, float]:
    """(items built, seconds) for ``samples`` contents of ``context`` tokens at ``offsets`` offsets."""
    from phasescope.probes.kv_options import TextKVSpec
    from phasescope.probes.kv_retrieval_text import TextKVRetrievalProbe

    spec = TextKVSpec(context_tokens=context)
    probe = TextKVRetrievalProbe(tokenizer, spec, bos_id=tokenizer.bos_token_id, min_gap=136, step=4, align=0)
    start = time.perf_counter()
    items = sum(len(group) for group in probe.stream(list(range(offsets)), samples, np.random.default_rng(0)))
    return items, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--contexts", default="1024,8192", help="prompt lengths in tokens, comma-separated")
    parser.add_argument("--samples", type=int, default=12)
    parser.add_argument("--offsets", type=int, default=24)
    parser.add_argument("--quick", action="store_true", help="one 256-token context, 2 contents (a smoke run)")
    args = parser.parse_args()
    contexts = [256] if args.quick else [int(c) for c in args.contexts.split(",")]
    samples = 2 if args.quick else args.samples
    from phasescope.backends.tokenizers import named_tokenizer

    tokenizer = named_tokenizer("deepseek-v4")
    for context in contexts:
        items, seconds = build_seconds(tokenizer, context, samples, args.offsets)
        print(
            f"{context:>7,} tokens: {samples} contents x {args.offsets} offsets = {items} items built and checked "
            f"in {seconds:.2f} s ({items / seconds:.0f} items/s)"
        )


if __name__ == "__main__":
    main()
