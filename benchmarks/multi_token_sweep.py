"""Issue #32's multi-token sweep, end to end through the command line: peak memory and records/s.

    .venv/bin/python benchmarks/multi_token_sweep.py [--before REV] [--limit SECONDS] [--quick]

A tiny random transformers DeepseekV4ForCausalLM carrying DeepSeek-V4's real tokenizer (129,280
ids; tests/hf_models.py), swept as the issue did: `phasescope sweep --model hf:DIR --pair-format
numbers --kv-gaps 0,1 --offsets 0:8 --samples 3` (48 records, multi-token answers), and the same
with `--pair-format words` (one-token answers: the yardstick). Each sweep runs in its own process;
its peak RSS is that process's max RSS (os.wait4). `--before REV` also runs the numbers sweep with
the code of commit REV (a temporary git worktree, its src/ first on PYTHONPATH), stopped after
`--limit` seconds (its records/s is then what it scored in that time). `--quick`: one content, one gap,
the numbers sweep alone (a smoke run).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ["--kv-gaps", "0,1", "--offsets", "0:8", "--samples", "3"]
QUICK = ["--kv-gaps", "0", "--offsets", "0:8", "--samples", "1"]


def run_sweep(
    model: Path, pair_format: str, out: Path, limit: float, sweep: list[str], src: Path | None = None
) -> dict:
    """One sweep in a fresh process: records written, seconds, peak RSS (MiB), stopped or not."""
    env = dict(os.environ, OMP_NUM_THREADS="2", HF_HUB_OFFLINE="1")
    if src is not None:
        env["PYTHONPATH"] = str(src)
    cmd = [sys.executable, "-m", "phasescope", "sweep", "--model", f"hf:{model}", "--pair-format", pair_format]
    cmd += [*sweep, "--out", str(out)]
    start = time.perf_counter()
    log = out.with_suffix(".log")  # a file, not a pipe: a full pipe would stall the sweep
    with log.open("w") as output:
        proc = subprocess.Popen(cmd, env=env, stdout=output, stderr=subprocess.STDOUT)
        stopped = threading.Event()
        timer = threading.Timer(limit, lambda: (stopped.set(), proc.send_signal(signal.SIGINT)))
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
    seconds = time.perf_counter() - start
    records = out / "records.jsonl"
    n = len(records.read_text().splitlines()) if records.exists() else 0
    if status and not stopped.is_set():
        raise RuntimeError(f"the sweep failed: {log.read_text()[-2000:]}")
    return {"records": n, "seconds": seconds, "peak_mib": usage.ru_maxrss / 1024, "stopped": stopped.is_set()}


def line(name: str, row: dict, yardstick: dict) -> str:
    rate = row["records"] / row["seconds"]
    note = f" (stopped after {row['seconds']:.0f} s)" if row["stopped"] else ""
    return (
        f"{name:>34}: {row['records']:2d} records in {row['seconds']:6.1f} s = {rate:5.2f} records/s{note}; "
        f"peak RSS {row['peak_mib']:6.0f} MiB ({row['peak_mib'] / yardstick['peak_mib']:.2f}x one-token answers)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", help="also run the numbers sweep with this commit's code")
    parser.add_argument("--limit", type=float, default=300.0, help="seconds after which a sweep is stopped")
    parser.add_argument(
        "--quick", action="store_true", help="one content, one key-value gap, the numbers sweep alone (a smoke run)"
    )
    args = parser.parse_args()
    sweep = QUICK if args.quick else SWEEP
    sys.path.insert(0, str(ROOT / "tests"))
    from hf_models import tiny_deepseek_v4
    from phasescope.backends.tokenizers import named_tokenizer

    with tempfile.TemporaryDirectory(prefix="phasescope-multi-token-") as tmp:
        tmp = Path(tmp)
        model = tiny_deepseek_v4(tmp / "v4", named_tokenizer("deepseek-v4"))
        rows = (
            {}
            if args.quick
            else {"one-token answers (words)": run_sweep(model, "words", tmp / "words", args.limit, sweep)}
        )
        rows["multi-token answers (numbers)"] = run_sweep(model, "numbers", tmp / "numbers", args.limit, sweep)
        if args.before:
            tree = tmp / "before"
            subprocess.run(["git", "worktree", "add", "--detach", str(tree), args.before], cwd=ROOT, check=True)
            try:
                before = run_sweep(model, "numbers", tmp / "before-numbers", args.limit, sweep, src=tree / "src")
                rows[f"numbers, code of {args.before[:10]}"] = before
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=True)
    yardstick = rows.get("one-token answers (words)", rows["multi-token answers (numbers)"])  # --quick: itself
    print("tiny DeepSeek-V4, its real tokenizer (129,280 ids): " + " ".join(sweep))
    for name, row in rows.items():
        print(line(name, row, yardstick))


if __name__ == "__main__":
    main()
