"""Compressed vs full attention: prefill time and peak memory, decode-step time and KV bytes.

Run:  .venv/bin/python benchmarks/attention.py [--quick]

One attention layer (d_model 512, 8 query heads, 8 KV heads, head dim 64, float32, batch 1),
timed whole (projections, norms, RoPE, attention) and attention only (everything after the
projections: pooling, RoPE of entries, the joint softmax; for full attention torch's SDPA).
The baseline is the same layer with full attention (torch's fused SDPA kernel), measured in
the same run; every number is reported as a ratio against it. Peak memory is the rise of the
process's resident high-water mark during a whole-layer forward (input and weights already
there) after a first one, measured in a fresh subprocess per configuration in which glibc
returns every large block when freed (``LIVE_PEAK_ENV``: the peak of live memory); the first
forward's rise, which also holds the process's one-time allocations, is reported beside it
("1st"; where the kernel refuses to reset the high-water mark, both columns show it). Times
come from another subprocess.
Prefill runs under no_grad, as scoring does: the compressed layer then reads inputs longer
than ``Attention.chunked_from`` in chunks through its cache (two at least, of at most
``Attention.prefill_chunk``); the attention-only timing runs on the whole sequence at once.
Decode caches are built directly at the target length (a real prefill at 128K would take
hours with full attention on a CPU); a step includes appending to the cache, timed after
one warm-up step.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import time
from pathlib import Path

import torch

from phasescope.kv import CompressionConfig, KVCache, KVView
from phasescope.kv.cache import LayerCache
from phasescope.model import Decoder, ModelConfig

D_MODEL, HEADS, KV_HEADS, HEAD_DIM = 512, 8, 8, 64
COMPRESSED = CompressionConfig(step=4, window=4, local=128, pooler="mean")
FULL = CompressionConfig(kind="full")


def attention_layer(scheme: CompressionConfig):
    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=8, d_model=D_MODEL, n_heads=HEADS, n_kv_heads=KV_HEADS, head_dim=HEAD_DIM, layers=(scheme,)
    )
    return Decoder(cfg).blocks[0].attn.eval()


def attention_core(attn, x: torch.Tensor):
    """A closure running everything after the q/k/v projections: pooling, RoPE of entries,
    attention. For a full layer that is torch's fused causal SDPA."""
    positions = torch.arange(x.shape[1])
    q, k, v = attn.project(x)
    feats = attn.pooler.features(x, k, v) if attn.pooler is not None else None
    q, k = attn.rope(q, positions), attn.rope(k, positions)

    def run():
        entries = attn._add_entries(LayerCache(), feats, 0, attn.rope) if attn.pooler is not None else {}
        return attn._attend(q, 0, KVView(raw_k=k, raw_v=v, raw_start=0, **entries))

    return run


def _layer_and_input(scheme_dict: dict, n_tokens: int):
    torch.set_num_threads(2)
    return attention_layer(CompressionConfig(**scheme_dict)), torch.randn(1, n_tokens, D_MODEL)


def _median_seconds(run, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _timing_child(scheme_dict: dict, n_tokens: int, repeats: int, queue) -> None:
    """(whole layer s, attention-only s), medians after a warm-up call of each."""
    attn, x = _layer_and_input(scheme_dict, n_tokens)
    with torch.no_grad():
        attn(x, 0, None)  # warm-up: first-call allocations and thread-pool start are not the kernel
        layer_s = _median_seconds(lambda: attn(x, 0, None), repeats)
        core = attention_core(attn, x)
        core()
        queue.put((layer_s, _median_seconds(core, repeats)))


def _peak_child(scheme_dict: dict, n_tokens: int, queue) -> None:
    """Peak rises (KiB) of the first whole-layer forward and of a second one (input and weights
    already there): the first also pays the process's one-time allocations of the code paths it
    touches (thread pools, kernels' first use); the second is what a forward needs."""
    attn, x = _layer_and_input(scheme_dict, n_tokens)
    with torch.no_grad():
        base = _status_kib("VmRSS")
        attn(x, 0, None)
        first = _status_kib("VmHWM") - base
        try:
            Path("/proc/self/clear_refs").write_text("5")  # resets the high-water mark to the current RSS
        except OSError:  # a kernel or sandbox that refuses: the first forward's rise stands for both
            queue.put((first, first))
            return
        base = _status_kib("VmRSS")
        attn(x, 0, None)
        queue.put((first, _status_kib("VmHWM") - base))


def _status_kib(field: str) -> int:
    """A memory line of /proc/self/status (Linux), in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field} line (the memory columns need Linux)")


# In the memory child, glibc maps every allocation above 64 KiB on its own and returns it when
# freed: the max-RSS rise is then the peak of live memory, not of what the allocator kept
# (without it the same configuration read 24-34 MiB at 1K from run to run). Timings come from a
# child without it (it makes allocations dearer).
LIVE_PEAK_ENV = {"MALLOC_MMAP_THRESHOLD_": "65536"}


def _run_child(target, args: tuple, env: dict[str, str]):
    """``target(*args, queue)`` in a fresh spawned process with ``env`` added; what it put."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # a spawned child takes the environment at its start
    try:
        proc = ctx.Process(target=target, args=(*args, queue))
        proc.start()
    finally:
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v
    result = queue.get()
    proc.join()
    return result


def prefill(scheme: CompressionConfig, n_tokens: int, repeats: int) -> tuple[float, float, int, int]:
    """(layer s, attention-only s, peak KiB of a forward, of the first forward): times from one
    child, the live peaks from another."""
    layer_s, core_s = _run_child(_timing_child, (scheme.to_dict(), n_tokens, repeats), {})
    first_kib, peak_kib = _run_child(_peak_child, (scheme.to_dict(), n_tokens), LIVE_PEAK_ENV)
    return layer_s, core_s, peak_kib, first_kib


def synthetic_cache(attn, scheme: CompressionConfig, n_tokens: int) -> KVCache:
    """A cache as it would stand after n_tokens (random contents, exact shapes)."""
    shape = (1, KV_HEADS)
    layer = LayerCache()
    n_raw = n_tokens if scheme.kind == "full" else min(n_tokens, scheme.local)
    layer.raw_k.append(torch.randn(*shape, n_raw, HEAD_DIM))
    layer.raw_v.append(torch.randn(*shape, n_raw, HEAD_DIM))
    if scheme.kind == "chunked":
        ends = torch.arange(scheme.step - 1, n_tokens, scheme.step)
        layer.comp_k.append(torch.randn(*shape, len(ends), HEAD_DIM))
        layer.comp_v.append(torch.randn(*shape, len(ends), HEAD_DIM))
        layer.comp_end.append(ends[None].expand(KV_HEADS, -1).clone())
        pending = min(n_tokens, scheme.window - 1)
        layer.pending = torch.randn(*shape, pending, attn.pooler.feature_dim())
    cache = KVCache(layers=[layer], length=n_tokens)
    return cache


def decode_step(scheme: CompressionConfig, n_tokens: int, repeats: int) -> tuple[float, int]:
    """Median time of one decode step at context n_tokens (after a warm-up step), and KV bytes."""
    attn = attention_layer(scheme)
    x = torch.randn(1, 1, D_MODEL)
    cache = synthetic_cache(attn, scheme, n_tokens)
    nbytes = cache.nbytes(include_pending=False)
    times = []
    with torch.no_grad():
        for step in range(repeats + 1):
            start = time.perf_counter()
            attn(x, n_tokens + step, cache.layers[0])
            if step:  # the first step also allots the buffers' spare capacity
                times.append(time.perf_counter() - start)
    return statistics.median(times), nbytes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the smallest size only (a smoke run)")
    parser.add_argument("--json", help="also write the rows to this JSON file (its other keys are kept)")
    parser.add_argument("--prefill-only", action="store_true", help="skip the decode rows")
    args = parser.parse_args()
    torch.set_num_threads(2)
    prefill_sizes = [1024] if args.quick else [1024, 2048, 4096, 8192, 16384, 32768]
    decode_sizes = [2048] if args.quick else [4096, 8192, 16384, 32768, 65536, 131072]
    if args.prefill_only:
        decode_sizes = []
    rows = {"prefill": [], "decode": []}
    print(f"compressed: {COMPRESSED}\n")
    print(
        "prefill     layer: full s  comp s  ratio | attention: full s  comp s  ratio"
        " | peak MiB: full  comp  ratio | 1st: full  comp  ratio"
    )
    for n in prefill_sizes:
        repeats = 3 if n <= 8192 else 2
        full_s, full_core, full_kib, full_first = prefill(FULL, n, repeats)
        comp_s, comp_core, comp_kib, comp_first = prefill(COMPRESSED, n, repeats)
        print(
            f"T={n:>6}  {full_s:14.3f} {comp_s:7.3f} {comp_s / full_s:5.2f}x"
            f" {full_core:17.3f} {comp_core:7.3f} {comp_core / full_core:5.2f}x"
            f" {full_kib / 1024:15.0f} {comp_kib / 1024:5.0f} {comp_kib / max(full_kib, 1):5.2f}x"
            f" {full_first / 1024:10.0f} {comp_first / 1024:5.0f} {comp_first / max(full_first, 1):5.2f}x"
        )
        rows["prefill"].append(
            dict(
                tokens=n,
                full_s=full_s,
                comp_s=comp_s,
                full_attention_s=full_core,
                comp_attention_s=comp_core,
                full_kib=full_kib,
                comp_kib=comp_kib,
                full_first_kib=full_first,
                comp_first_kib=comp_first,
            )
        )
    print("\ndecode        full ms  comp ms   time ratio   KV bytes ratio   (L + T/s)/T")
    for n in decode_sizes:
        full_s, full_bytes = decode_step(FULL, n, repeats=9)
        comp_s, comp_bytes = decode_step(COMPRESSED, n, repeats=9)
        expected = (COMPRESSED.local + n / COMPRESSED.step) / n
        print(
            f"T={n:>6}  {full_s * 1e3:8.2f} {comp_s * 1e3:8.2f} {comp_s / full_s:11.2f}x"
            f" {comp_bytes / full_bytes:15.4f} {expected:13.4f}"
        )
        rows["decode"].append(
            dict(tokens=n, full_s=full_s, comp_s=comp_s, full_bytes=full_bytes, comp_bytes=comp_bytes)
        )
    if args.json:  # other keys (benchmarks/long_forward.py's rows) are kept
        path = Path(args.json)
        data = json.loads(path.read_text()) if path.exists() else {}
        data.update(rows)
        path.write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    main()
