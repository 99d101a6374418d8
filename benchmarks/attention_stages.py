"""Where a short prefill's time goes: one attention layer (benchmarks/attention.py's), full vs
compressed, each stage timed inside the same forward calls.

    .venv/bin/python benchmarks/attention_stages.py [--tokens 1024] [--repeats 25] [--quick]

Stages (milliseconds per forward, the mean of the fastest three quarters of the calls): the
projections, the pooling features, adding the entries (pooling, RoPE of the entries, cache
appends), the attention proper (for the compressed layer also its parts: the entries'
visibility biases, flash calls, merges), everything in ``attend`` (``_attend_owned``: RoPE of q
and k, cache, the above) and the whole forward (with the output projection and, for the compressed layer, its
chunking). Both layers run alternately in one process, so the machine's state is shared. The
last row counts the ATen operations of one forward of each.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).parent))
import phasescope.kv.attention as joint  # noqa: E402
from attention import COMPRESSED, FULL, attention_layer  # noqa: E402
from phasescope.model import decoder  # noqa: E402

STAGES = [
    (decoder.Attention, "project"),
    (decoder.Attention, "_features"),
    (decoder.Attention, "_add_entries"),
    (decoder.Attention, "_attend"),
    (joint, "_visible_bias"),
    (joint, "_flash_lse"),
    (joint, "_merge"),
    (decoder.Attention, "_attend_owned"),
    (decoder.Attention, "forward"),
]


def timing(seconds: dict[str, float]):
    """Wrap each stage so its calls add their time to ``seconds[stage]``."""
    for owner, name in STAGES:
        original = getattr(owner, name)

        def timed(*args, _original=original, _name=name, **kwargs):
            start = time.perf_counter()
            result = _original(*args, **kwargs)
            seconds[_name] += time.perf_counter() - start
            return result

        setattr(owner, name, timed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--quick", action="store_true", help="256 tokens, 4 repeats (a smoke run)")
    args = parser.parse_args()
    tokens, repeats = (256, 4) if args.quick else (args.tokens, args.repeats)
    torch.set_num_threads(2)
    layers = {"full": attention_layer(FULL), "compressed": attention_layer(COMPRESSED)}
    x = torch.randn(1, tokens, 512)
    per_layer = {kind: defaultdict(list) for kind in layers}
    seconds: dict[str, float] = defaultdict(float)  # the current forward's, per stage
    timing(seconds)
    with torch.no_grad():
        for a in layers.values():
            a(x, 0, None)  # warm-up
        for _ in range(repeats):
            for kind, layer in layers.items():
                seconds.clear()
                layer(x, 0, None)
                for _, name in STAGES:
                    per_layer[kind][name].append(seconds[name])
    print(f"one attention layer, {tokens} tokens, ms per forward (mean of the fastest 3/4 of {repeats}):")
    print(f"{'stage':>16} " + " ".join(f"{kind:>11}" for kind in layers))
    for _, name in STAGES:
        cells = []
        for kind in layers:
            values = sorted(per_layer[kind][name])[: max(1, repeats * 3 // 4)]
            cells.append(f"{1e3 * sum(values) / len(values):11.2f}")
        print(f"{name:>16} " + " ".join(cells))
    with torch.no_grad():
        counts = [operations(layer, x) for layer in layers.values()]
    print(f"{'aten ops':>16} " + " ".join(f"{n:11d}" for n in counts) + "  (per forward: the count of operations)")


class _Count(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


def operations(layer, x: torch.Tensor) -> int:
    """ATen operations one forward dispatches (views included): at short lengths each costs
    microseconds whatever its size."""
    with _Count() as count:
        layer(x, 0, None)
    return count.calls


if __name__ == "__main__":
    main()
