"""The engine demo: a tiny DeepSeek-V4-style model, its cache, and its full-attention control."""

from __future__ import annotations

import time

import torch
from rich.console import Console
from rich.table import Table

from phasescope.kv import scheme
from phasescope.model import Decoder, cache_bytes, measured_cache_bytes, preset


def run_engine_demo(n_tokens: int, console: Console) -> None:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 256, (1, n_tokens), generator=generator)
    table = Table(title=f"tiny models, prompt of {n_tokens} tokens")
    for col in ("scheme", "cache (measured)", "cache (formula)", "vs full", "prefill s", "16 decode steps s"):
        table.add_column(col)
    rows = {}
    for name in ("full", "v4-csa", "tiny-4", "tiny-4-stagger", "v4.1"):
        torch.manual_seed(0)
        cfg = preset("tiny", 256, scheme(name, local=16) if name != "full" else scheme(name))
        model = Decoder(cfg).eval()
        start = time.perf_counter()
        measured = measured_cache_bytes(model, ids)
        prefill_s = time.perf_counter() - start
        start = time.perf_counter()
        model.generate(ids[:, :256], max_new_tokens=16)
        decode_s = time.perf_counter() - start
        rows[name] = (measured, cache_bytes(cfg, n_tokens), prefill_s, decode_s)
    full_bytes = rows["full"][0]
    for name, (measured, formula, prefill_s, decode_s) in rows.items():
        table.add_row(
            name,
            f"{measured / 1024:.1f} KiB",
            f"{formula / 1024:.1f} KiB",
            f"{measured / full_bytes:.1%}",
            f"{prefill_s:.2f}",
            f"{decode_s:.2f}",
        )
    console.print(table)
    console.print(
        "Compressed layers keep L=16 raw tokens, one entry per step and the pooling state of the open "
        "window. Next: `phasescope schemes`, `phasescope savings --scheme v4-csa --tokens 131072`."
    )
