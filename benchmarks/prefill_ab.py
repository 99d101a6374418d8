"""Compressed vs full prefill time with this tree's code and with another commit's, alternately.

    .venv/bin/python benchmarks/prefill_ab.py [--before REV] [--tokens 1024] [--rounds 3] [--quick]

The layer of benchmarks/attention.py (one attention layer, d_model 512, 8 heads): its prefill
time over full attention's moves with the machine's state by more than most changes move it
(1.12x and 1.37x at 1K on one day, the same code). To tell the code from the machine, each
round times both layers in a fresh process with this tree's ``src/`` and then with REV's (a git
worktree; default HEAD, i.e. the uncommitted change), and prints each ratio; compare the
columns, not the rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(tokens: int, repeats: int) -> None:
    """Print {"full_ms", "comp_ms"}: medians of alternating medians, after a warm-up."""
    import torch

    sys.path.insert(0, str(Path(__file__).parent))
    from attention import COMPRESSED, FULL, _median_seconds, attention_layer

    torch.set_num_threads(2)
    full, comp = attention_layer(FULL), attention_layer(COMPRESSED)
    x = torch.randn(1, tokens, 512)
    times = {"full_ms": [], "comp_ms": []}
    with torch.no_grad():
        for _ in range(3):
            full(x, 0, None), comp(x, 0, None)
        for _ in range(repeats):
            times["full_ms"].append(_median_seconds(lambda: full(x, 0, None), 9) * 1e3)
            times["comp_ms"].append(_median_seconds(lambda: comp(x, 0, None), 9) * 1e3)
    print(json.dumps({k: statistics.median(v) for k, v in times.items()}))


def timed(src: Path, tokens: int, repeats: int) -> dict:
    """The child's numbers with ``src`` first on the path (before the installed package)."""
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="2")
    cmd = [sys.executable, __file__, "--child", "--tokens", str(tokens), "--repeats", str(repeats)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default="HEAD", help="the commit to compare with (default HEAD)")
    parser.add_argument("--tokens", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="256 tokens, one round (a smoke run)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.tokens, args.repeats)
        return
    tokens, rounds, repeats = (256, 1, 1) if args.quick else (args.tokens, args.rounds, args.repeats)
    with tempfile.TemporaryDirectory(prefix="phasescope-prefill-ab-") as tmp:
        tree = Path(tmp) / "before"
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), args.before], cwd=ROOT, check=True)
        try:
            print(f"one attention layer, {tokens} tokens: compressed / full prefill time, alternating")
            print(f"{'round':>5} {'this tree':>10} {args.before[:10]:>10}")
            for i in range(rounds):
                now, before = timed(ROOT / "src", tokens, repeats), timed(tree / "src", tokens, repeats)
                ratio = [r["comp_ms"] / r["full_ms"] for r in (now, before)]
                print(f"{i + 1:>5} {ratio[0]:9.3f}x {ratio[1]:9.3f}x")
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=True)


if __name__ == "__main__":
    main()
