"""A served sweep's cost per record, side by side on one server: phasescope's `openai:` backend
without echo (``logprob_token_ids`` at the answer position, the ids checked through
``return_token_ids``), the same backend forced onto the echo path it used before (the prompt's
log-probs at every position, one request per item), and lm-evaluation-harness's
`local-completions` loglikelihood (one echoed request per candidate, what `lm_eval --model
local-completions` sends) on the same prompts and candidates.

Run:  .venv/bin/python benchmarks/served.py [--lengths 2048 8192] [--items 3] [--quick]

The server: a real vLLM CPU server (`make vllm-venv`) serving a tiny random Qwen3 (1 layer,
head_dim 64) with Qwen's real 151,669-token vocabulary; --quick: the suite's fake server on a
word-level tiny Qwen3 (a smoke run of the code paths, no vLLM). Each item: a prompt of random ids
of the given length and two single-token candidates; one request in flight at a time. Response
bytes are counted as received. The three paths' log-probs are checked equal.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from phasescope.backends import load_spec  # noqa: E402
from phasescope.backends.served import Options as ServedOptions  # noqa: E402
from phasescope.probes.base import ProbeItem  # noqa: E402


def items_of(length: int, count: int, vocab: int, seed: int) -> list[ProbeItem]:
    rng = np.random.default_rng(seed)
    out = []
    for content in range(count):
        ids = [int(t) for t in rng.integers(10, vocab - 10, size=length)]
        right, wrong = (int(t) for t in rng.integers(10, vocab - 10, size=2))
        candidates = {"right": [right], "wrong": [wrong]}
        out.append(ProbeItem(content, 0, ids, candidates, "right", length - 1, length, rule="choice"))
    return out


class Bytes:
    """Response bytes received, through an httpx event hook or around requests.post."""

    def __init__(self):
        self.total = 0

    def httpx_hook(self, response):
        response.read()
        self.total += len(response.content)

    @contextlib.contextmanager
    def around_requests(self):
        import requests

        post = requests.post

        def counted(*args, **kwargs):
            answer = post(*args, **kwargs)
            self.total += len(answer.content)
            return answer

        requests.post = counted
        try:
            yield
        finally:
            requests.post = post


def phasescope_path(url: str, model: Path, items: list[ProbeItem], echo: bool) -> tuple[float, int, list[dict]]:
    backend = load_spec(f"openai:{url}#{model}", ServedOptions(tokenizer=str(model), concurrency=1, timeout=900))
    if echo:
        backend.no_echo = False  # the path before: one echoed request per item (logprob_token_ids)
    counter = Bytes()
    backend.transport.client.event_hooks["response"].append(counter.httpx_hook)
    backend.score(items[:1])  # warm-up, and the path is found
    counter.total = 0
    start = time.perf_counter()
    results = backend.score(items)
    seconds = time.perf_counter() - start
    assert backend.no_echo is (not echo), backend.scoring_path
    return seconds, counter.total, results


def lm_eval_path(url: str, model: Path, items: list[ProbeItem], length: int) -> tuple[float, int, list[float]]:
    from lm_eval.models.openai_completions import LocalCompletionsAPI

    lm = LocalCompletionsAPI(
        base_url=f"{url}/completions",
        model=str(model),
        tokenizer=str(model),
        tokenizer_backend="huggingface",
        tokenized_requests=True,
        max_length=length + 8,
        num_concurrent=1,
        timeout=900,
    )
    # (context, continuation) as ids: what lm-eval sends after tokenizing a task's text
    requests = [(("", ""), it.input_ids, it.candidates[name]) for it in items for name in ("right", "wrong")]
    counter = Bytes()
    with counter.around_requests():
        lm._loglikelihood_tokens(requests[:1], disable_tqdm=True)  # warm-up
        counter.total = 0
        start = time.perf_counter()
        answers = lm._loglikelihood_tokens(requests, disable_tqdm=True)
        seconds = time.perf_counter() - start
    return seconds, counter.total, [logprob for logprob, _ in answers]


@contextlib.contextmanager
def server(quick: bool, tmp: Path, longest: int):
    if quick:
        from transformers import AutoModelForCausalLM

        from fake_server import FakeVLLM
        from hf_models import tiny_qwen3, word_tokenizer

        model = tiny_qwen3(tmp / "qwen3", word_tokenizer())
        fake = FakeVLLM(AutoModelForCausalLM.from_pretrained(model), name=str(model))  # as `vllm serve PATH` names it
        try:
            yield fake.url, model
        finally:
            fake.close()
        return
    from test_vllm import tiny_model
    from vllm_server import serve

    model = tiny_model(tmp / "qwen3", max_len=longest + 64)
    with serve(model, max_len=longest + 64, kv_cache_gib=2, startup_s=600) as url:
        yield url, model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--items", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run: the fake server, 48 tokens, 2 items")
    args = parser.parse_args()
    lengths, count = ([48], 2) if args.quick else (args.lengths, args.items)
    print("tokens | path | s/record | response bytes/record | vs the echo path")
    with tempfile.TemporaryDirectory() as tmp, server(args.quick, Path(tmp), max(lengths)) as (url, model):
        from transformers import AutoTokenizer

        vocab = len(AutoTokenizer.from_pretrained(model))
        for length in lengths:
            items = items_of(length, count + 1, vocab, seed=length)[1:]  # the first: a warm-up of its own
            fast, fast_bytes, fast_results = phasescope_path(url, model, items, echo=False)
            echo, echo_bytes, echo_results = phasescope_path(url, model, items, echo=True)
            harness, harness_bytes, harness_logprobs = lm_eval_path(url, model, items, length)
            ours = [r["logprobs"][name] for r in fast_results for name in ("right", "wrong")]
            theirs = [r["logprobs"][name] for r in echo_results for name in ("right", "wrong")]
            equal = np.allclose(ours, theirs, atol=1e-3) and np.allclose(ours, harness_logprobs, atol=1e-3)
            for name, seconds, received in (
                ("phasescope, no echo", fast, fast_bytes),
                ("phasescope, echo (before)", echo, echo_bytes),
                ("lm-eval local-completions", harness, harness_bytes),
            ):
                print(
                    f"{length:,} | {name} | {seconds / count:.3f} | {received / count:,.0f} | "
                    f"{(echo / count) / (seconds / count):.1f}x"
                )
            print(f"{length:,} | the three paths' log-probs equal: {equal}")


if __name__ == "__main__":
    main()
