"""A served sweep's start-up: seconds from `phasescope sweep` starting to the server receiving its
first request, on DeepSeek-V4's real tokenizer (issue #55: a CI check pays it twice per run).

    .venv/bin/python benchmarks/sweep_startup.py [--before REV] [--repeats 3] [--quick]

The sweep is the README's served command (50 contents x 24 offsets) against a local server that
answers nothing useful: it only notes when the first POST arrives, and the sweep is killed then.
`--before REV` runs the same command with the code of commit REV (a temporary git worktree, its
src/ first on PYTHONPATH), in the same run, so the two are measured on the same machine and load.
Each is run ``--repeats`` times; the table has the fastest and the median. Results:
docs/performance.md, 'Start-up of a served sweep'.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMAND = ["--tokenizer", "deepseek-v4", "--step", "4", "--local", "128"]  # shift-needle: both codes run it


class FirstRequest:
    """A server that records when its first POST arrives (and answers 503, so nothing is scored)."""

    def __init__(self):
        self.first: float | None = None
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(404)
                self.end_headers()

            def do_POST(self):
                if owner.first is None:
                    owner.first = time.perf_counter()
                self.send_response(503)
                self.end_headers()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def first_request_seconds(src: Path, out: Path, extra: list[str]) -> float:
    """Seconds from starting the sweep to its first request (the process is killed then)."""
    server = FirstRequest()
    env = dict(os.environ, PYTHONPATH=str(src), OMP_NUM_THREADS="1")
    args = [sys.executable, "-m", "phasescope", "sweep", "--model", f"openai:{server.url}#m", *COMMAND, *extra]
    start = time.perf_counter()
    process = subprocess.Popen([*args, "--out", str(out)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while server.first is None:
            if process.poll() is not None:
                raise RuntimeError(f"the sweep ended before any request: {process.stderr.read().decode()[-2000:]}")
            time.sleep(0.01)
        return server.first - start
    finally:
        process.kill()
        process.wait()
        server.close()


def measure(src: Path, tmp: Path, name: str, repeats: int, extra: list[str]) -> list[float]:
    times = []
    for i in range(repeats):
        times.append(first_request_seconds(src, tmp / f"{name}-{i}", extra))
        print(f"{name}: {times[-1]:.2f} s", flush=True)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="also time the code of this commit")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one run, 4 contents (the suite's smoke test)")
    args = parser.parse_args()
    repeats, extra = (1, ["--samples", "4"]) if args.quick else (args.repeats, [])
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rows["this code"] = measure(ROOT / "src", tmp, "now", repeats, extra)
        if args.before:
            tree = tmp / "before"
            subprocess.run(["git", "worktree", "add", "--detach", str(tree), args.before], cwd=ROOT, check=True)
            try:
                rows[f"code of {args.before[:10]}"] = measure(tree / "src", tmp, "before", repeats, extra)
            finally:
                subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=True)
    print("\n| code | fastest | median |\n|---|---|---|")
    for name, times in rows.items():
        print(f"| {name} | {min(times):.1f} s | {statistics.median(times):.1f} s |")


if __name__ == "__main__":
    main()
