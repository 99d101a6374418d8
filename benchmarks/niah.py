"""Needle-in-a-haystack throughput: items per second at long contexts, prompt build and
scoring together, with the peak memory of the whole sweep.

    .venv/bin/python benchmarks/niah.py native [--context 131072] [--samples 2]
    .venv/bin/python benchmarks/niah.py hf [--context 131072] [--samples 1]
    .venv/bin/python benchmarks/niah.py vllm [--context 32768] [--samples 2]
    .venv/bin/python benchmarks/niah.py deepseek-v4 [--context 131072] [--samples 1]
    .venv/bin/python benchmarks/niah.py deepseek-v4-one-item [--context 131072]

native: the shipped tiny-s4 demo model (scalar-gate pooling, s = w = 4, L = 8) on kv-retrieval
with --context-tokens (its training rows end to end, ~37K pairs at 128K), 8 offsets,
shift-needle, prefix reuse on (each content's shared prefix is read once). hf: a tiny random
transformers Qwen3 (1 layer, full attention) through hf:, the text probe with --pair-format
numbers, prefix reuse on (2048 tokens per call through its cache). vllm: a real
vLLM CPU server (`make vllm-venv`) serving a tiny random Qwen3 (1 layer, head_dim 64), the
text probe with --pair-format numbers at 32K tokens, through openai:. Peak memory is this
process's max RSS (for vllm the server's own memory is not included). deepseek-v4: the study's
layout on the study's tokenizer -- a tiny random transformers DeepseekV4ForCausalLM (2 CSA
layers, s = 4, w = 8, raw window 128) with DeepSeek-V4's real tokenizer (129,280 ids) through
hf:, the text probe with --pair-format auto (numbers: eight tokens per pair, ~16K pairs at 128K),
prefix reuse through its cache, logits kept only at the positions scored.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import phasescope
from phasescope.backends.served import Options as ServedOptions

DEMO = Path(phasescope.__file__).parent / "assets" / "demo" / "tiny-s4"
OFFSETS = range(8)


def report(kind: str, context: int, records: list, seconds: float) -> None:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{kind}: {len(records)} items of {context:,} tokens in {seconds:.0f} s = {len(records) / seconds:.3f} items/s "
        f"({seconds / len(records):.1f} s/item); accuracy {sum(r.correct for r in records)}/{len(records)}; "
        f"peak RSS {peak:.0f} MiB"
    )


def timed_sweep(kind: str, model: str, context: int, samples: int, **options) -> None:
    """One sweep of 8 offsets at ``context`` tokens, timed whole and reported."""
    start = time.perf_counter()
    plan = phasescope.sweep(model, offsets=OFFSETS, samples=samples, context_tokens=context, dry_run=True, **options)
    numbers = {k: v for k, v in plan.plan.items() if isinstance(v, (int, float))}
    print(f"{kind}: dry run: " + ", ".join(f"{k} {v:,}" for k, v in numbers.items()))
    result = phasescope.sweep(model, offsets=OFFSETS, samples=samples, context_tokens=context, progress=True, **options)
    report(kind, context, result.records, time.perf_counter() - start)


def native(context: int, samples: int) -> None:
    timed_sweep("native tiny-s4", str(DEMO), context, samples)


def hf(context: int, samples: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
    from hf_models import tiny_qwen3, word_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_qwen3(Path(tmp) / "qwen3", word_tokenizer(), max_position_embeddings=context + 64)
        kind = "hf: tiny Qwen3 (full attention)"
        timed_sweep(kind, f"hf:{model}", context, samples, step=4, local=128, pair_format="numbers")


def vllm(context: int, samples: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
    from test_vllm import tiny_model
    from vllm_server import serve

    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_model(Path(tmp) / "qwen3", max_len=context + 64)
        with serve(model, max_len=context + 64, kv_cache_gib=2, startup_s=600) as url:
            options = ServedOptions(tokenizer=str(model), concurrency=2, timeout=600)
            spec = f"openai:{url}#{model}"
            extra = dict(step=4, local=64, pair_format="numbers", options=options)
            timed_sweep("vLLM CPU, tiny Qwen3", spec, context, samples, **extra)


def deepseek_v4(context: int, samples: int) -> None:
    sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
    from hf_models import tiny_deepseek_v4
    from phasescope.backends.tokenizers import named_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        model = tiny_deepseek_v4(Path(tmp) / "v4", named_tokenizer("deepseek-v4"))
        timed_sweep("hf: tiny DeepSeek-V4, its real tokenizer", f"hf:{model}", context, samples)


def deepseek_v4_one_item(context: int) -> None:
    """One item (content 0, offset 0) of the study's layout scored end to end, the way a sweep
    scores it (same probe, same backend): a whole sweep at 128K is 8 such items and, since the
    attention over compressed entries grows with the prompt, too long for a laptop CPU."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
    import numpy as np

    from hf_models import tiny_deepseek_v4
    from phasescope.backends import resolve_model
    from phasescope.backends.base import ScoringPlan
    from phasescope.backends.tokenizers import named_tokenizer
    from phasescope.probes import build_probe, probe_spec
    from phasescope.probes.base import ProbeContext
    from phasescope.specs import Geometry, GeometryOverrides

    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        backend = resolve_model(f"hf:{tiny_deepseek_v4(Path(tmp) / 'v4', named_tokenizer('deepseek-v4'))}")
        geometry = Geometry.resolve(backend.info.geometry, GeometryOverrides(), "tiny DeepSeek-V4")
        spec = probe_spec("kv-retrieval", {"context_tokens": context})
        ctx = ProbeContext(spec, geometry, backend.info.tokenizer, backend.info.bos_id)
        probe = build_probe(ctx)
        item = next(iter(probe.stream(list(OFFSETS), 1, np.random.default_rng(0))))[0]
        built = time.perf_counter()
        longest = len(item.input_ids) + max(len(c) for c in item.candidates.values())
        single = all(len(c) == 1 for c in item.candidates.values())
        backend.prepare(ScoringPlan(geometry.step, geometry.align, 1, True, single, longest))  # read through its cache
        result = backend.score([item])[0]
        scored = time.perf_counter()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"hf: tiny DeepSeek-V4, its real tokenizer: one item of {len(item.input_ids):,} tokens "
        f"({probe.spec().get('pairs')} pairs) built in {built - start:.0f} s, scored in "
        f"{scored - built:.0f} s; {len(result['logprobs'])} candidates; peak RSS {peak:.0f} MiB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("backend", choices=["native", "hf", "vllm", "deepseek-v4", "deepseek-v4-one-item"])
    parser.add_argument("--context", type=int, default=None, help="tokens per prompt (native 131072, vllm 32768)")
    parser.add_argument("--samples", type=int, default=None, help="contents, each at 8 offsets (default 2; hf 1)")
    parser.add_argument("--quick", action="store_true", help="a smoke run, smallest sizes")
    args = parser.parse_args()
    if args.quick:
        args.context, args.samples = args.context or 1024, 1
    if args.backend == "native":
        native(args.context or 131072, args.samples or 2)
    elif args.backend == "hf":
        hf(args.context or 131072, args.samples or 1)
    elif args.backend == "deepseek-v4-one-item":
        deepseek_v4_one_item(args.context or 131072)
    elif args.backend == "deepseek-v4":
        deepseek_v4(args.context or 131072, args.samples or 1)
    else:
        vllm(args.context or 32768, args.samples or 2)


if __name__ == "__main__":
    main()
