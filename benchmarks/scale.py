"""One sweep run whole, then split in two parts run as two tasks of a local Ray cluster and merged
(issue #58): wall time of each, their ratio, and whether the merged records equal the unsplit ones;
then what the study's sweep (128K-token prompts, contents x 24 offsets) costs per part at N parts,
from the dry run.

    .venv/bin/python benchmarks/scale.py [--samples 16] [--context-tokens 4096] [--study-samples 64] [--quick]

Both runs score the same sweep on the shipped tiny-s4, in the same process and machine: the whole
sweep in this process (torch's threads: every core), the parts in two Ray workers (one CPU, one
thread each), the Ray time counting the cluster's start, the workers' start-up and the merge.
With --quick (the suite's smoke) the two parts are swept by hand one after the other and merged,
without a cluster (tests/test_scale.py runs --ray on a local cluster). Results: docs/performance.md,
'A sweep split in parts and merged'.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import phasescope
from phasescope.scale import merge, run_on_ray

MODEL = "demo:tiny-s4"


def records(run_dir: Path) -> dict:
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    return {(r["content_id"], r["offset"], r.get("variant", 0)): r for r in map(json.loads, lines)}


def equal(merged: Path, whole: Path) -> tuple[bool, float]:
    """(the same keys, prompts and grades; the largest log-prob difference)."""
    a, b = records(merged), records(whole)
    same = a.keys() == b.keys() and all(
        a[k]["prompt_digest"] == b[k]["prompt_digest"] and a[k]["correct"] == b[k]["correct"] for k in a
    )
    worst = max(abs(a[k]["logprob_target"] - b[k]["logprob_target"]) for k in a) if same else float("nan")
    return same, worst


def by_hand(sweep: dict, root: Path):
    """The two parts swept one after the other in this process, then merged (no cluster)."""
    parts = [phasescope.sweep(MODEL, out=root / f"part-{i}", shard=(i, 2), **sweep).run_dir for i in range(2)]
    return merge(parts, root / "merged")


def timed_sweeps(sweep: dict, root: Path, ray: bool) -> None:
    start = time.perf_counter()
    whole = phasescope.sweep(MODEL, out=root / "whole", **sweep).run_dir
    whole_s = time.perf_counter() - start
    start = time.perf_counter()
    merged = run_on_ray(MODEL, "local", 2, out=root / "ray", **sweep) if ray else by_hand(sweep, root)
    ray_s = time.perf_counter() - start
    same, worst = equal(merged.run_dir, whole)
    print(f"sweep: {sweep['samples']} contents x 24 offsets at {sweep['context_tokens']:,} tokens on {MODEL}")
    print("| run | records | wall s |")
    print("|---|---:|---:|")
    print(f"| whole, one process | {len(records(whole))} | {whole_s:.1f} |")
    how = "--ray, 2 parts on 2 workers" if ray else "--shard 0/2 then 1/2 in one process"
    print(f"| {how}, merged | {len(merged.records)} | {ray_s:.1f} |")
    print(f"{'ray' if ray else 'parts'} / whole wall time: {ray_s / whole_s:.2f}x")
    print(f"merged records equal the unsplit ones (keys, prompt digests, grades): {same}; "
          f"largest |logprob difference|: {worst:.2e}")  # fmt: skip


def study_costs(samples: int, context_tokens: int, counts: list[int]) -> None:
    """The dry run of the study's sweep at N parts: every part's records, forward passes, tokens."""
    print(f"\nthe study's sweep: {samples} contents x 24 offsets at {context_tokens:,} tokens (dry run, per part)")
    print("| N parts | records per part | forward passes per part | prompt tokens per part | dry run s |")
    print("|---:|---:|---:|---:|---:|")
    for n in counts:
        start = time.perf_counter()
        plan = phasescope.sweep(
            MODEL, samples=samples, offsets=range(24), context_tokens=context_tokens, shard=(0, n), dry_run=True
        ).plan
        seconds = time.perf_counter() - start
        parts = plan["parts"]
        passes = next(k for k in parts[0] if k.startswith("forward_passes") or k.startswith("requests"))
        cells = " | ".join(spread(parts, key) for key in ("records", passes, "prompt_tokens"))
        print(f"| {n} | {cells} | {seconds:.0f} |")


def spread(parts: list[dict], key: str) -> str:
    """The parts' values of ``key``: one number when every part has it, else the range."""
    low, high = min(p[key] for p in parts), max(p[key] for p in parts)
    return f"{low:,}" if low == high else f"{low:,} to {high:,}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16, help="contents of the timed sweep")
    parser.add_argument("--context-tokens", type=int, default=4096, help="prompt length of the timed sweep")
    parser.add_argument("--study-samples", type=int, default=64, help="contents of the study's sweep (dry run)")
    parser.add_argument("--quick", action="store_true", help="a smoke: tiny sizes, the parts by hand (no Ray)")
    args = parser.parse_args()
    if args.quick:
        args.samples, args.context_tokens, args.study_samples = 4, 512, 4
    sweep = {"samples": args.samples, "offsets": range(24), "context_tokens": args.context_tokens}
    with tempfile.TemporaryDirectory() as tmp:
        timed_sweeps(sweep, Path(tmp), ray=not args.quick)
    study_costs(args.study_samples, 2048 if args.quick else 131072, [2, 4] if args.quick else [8, 64])


if __name__ == "__main__":
    main()
