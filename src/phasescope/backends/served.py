"""``openai:URL#MODEL``: a model behind an OpenAI-compatible completions server (vLLM first).

Positions are the whole point, so prompts are sent as token ids, tokenized here with the
model's own tokenizer (``--tokenizer DIR``), and each candidate's log-probs are read from the
echoed prompt: one request per (item, candidate) with ``prompt = ids + candidate``,
``echo=true``, ``logprobs=1``, ``return_tokens_as_token_ids=true`` (vLLM). When every
candidate is one token and the server supports vLLM's ``logprob_token_ids``, one request per
item returns all candidates' log-probs at the generated position (checked on the first
batch; a server without it gets the per-candidate requests). The ids the server
echoes must equal those sent — a mismatch is an error naming the first differing position.
A candidate is greedily right when the top-1 token at each of its positions is its token.

Requests run ``concurrency`` at a time, each with a timeout; 5xx answers, dropped connections
and unreadable JSON are retried with exponential backoff, and the last failure is a clear
error. Records already scored stay in ``records.jsonl`` (the sweep writes per batch), so
rerunning resumes. The API key is read from an environment variable and is never logged or
written to the run directory.
"""

from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor

from phasescope.backends.base import Backend, BackendOptions, ModelInfo, load_tokenizer
from phasescope.errors import InputError
from phasescope.probes.base import ProbeItem

PREFIX = "openai:"
SUMMARY = "an OpenAI-compatible completions server (vLLM), prompts sent as token ids; needs --tokenizer"
EXAMPLE = "openai:http://localhost:8000/v1#MODEL"
TOKEN_PREFIX = "token_id:"


class FastPathUnavailable(Exception):
    """The server ignores ``logprob_token_ids``: fall back to one request per candidate."""


class ServedModel(Backend):
    timed_in_dry_run = False  # a dry run spends no request

    def __init__(self, url: str, model: str, options: BackendOptions, info: ModelInfo):
        import httpx

        self.url, self.model, self.options, self.info = url.rstrip("/"), model, options, info
        key = os.environ.get(options.api_key_env, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(headers=headers, timeout=options.timeout)
        self.fast: bool | None = None  # logprob_token_ids: None untried, True works, False unsupported

    def cost(self, records: int, sequences: int, candidates: int) -> dict:
        """One request per item with logprob_token_ids (single-token candidates), else per candidate."""
        return {"requests": sequences, "requests_without_logprob_token_ids": candidates}

    def score(self, items: list[ProbeItem]) -> list[dict]:
        """One result per item: greedy, logprob_target, logprobs (as ``backends.scoring``)."""
        if self.fast is not False and all(len(c) == 1 for it in items for c in it.candidates.values()):
            try:
                with ThreadPoolExecutor(max_workers=self.options.concurrency) as pool:
                    results = list(pool.map(self._item_fast, items))
                self.fast = True
                return results
            except FastPathUnavailable:
                if self.fast:  # it worked before: the server changed its answers, not a missing feature
                    raise InputError(f"{self.url}: the server stopped returning logprob_token_ids") from None
                self.fast = False  # this server does not support it: one request per candidate
        jobs = [(item, name, tokens) for item in items for name, tokens in item.candidates.items()]
        with ThreadPoolExecutor(max_workers=self.options.concurrency) as pool:
            answers = list(pool.map(lambda job: self._candidate(*job), jobs))
        results = {id(item): {"logprobs": {}, "greedy": False} for item in items}
        for (item, name, _), (logprob, greedy) in zip(jobs, answers, strict=True):
            result = results[id(item)]
            result["logprobs"][name] = logprob
            if name == item.target:
                result["greedy"], result["logprob_target"] = greedy, logprob
        return [results[id(item)] for item in items]

    def _item_fast(self, item: ProbeItem) -> dict:
        """Single-token candidates in one request: vLLM's ``logprob_token_ids`` returns their
        log-probs at the generated position; greedy decoding's token is the argmax."""
        sent = item.input_ids
        wanted = sorted({tokens[0] for tokens in item.candidates.values()})
        body = self._body(sent) | {"logprob_token_ids": wanted}
        logprobs = self._choice(self._post(body), item).get("logprobs") or {}
        echoed, tops = self._checked(logprobs, sent, item)
        top = tops[len(sent)] if len(tops) > len(sent) else None
        if not top or any(f"{TOKEN_PREFIX}{t}" not in top for t in wanted) or len(echoed) <= len(sent):
            raise FastPathUnavailable
        at_answer = {name: top[f"{TOKEN_PREFIX}{tokens[0]}"] for name, tokens in item.candidates.items()}
        scores = {name: self._logprob(value, item) for name, value in at_answer.items()}
        greedy = _token_id(echoed[len(sent)]) == item.candidates[item.target][0]
        return {"greedy": greedy, "logprob_target": scores[item.target], "logprobs": scores}

    def _choice(self, answer: dict, item: ProbeItem) -> dict:
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not choices or not isinstance(choices[0], dict):
            raise InputError(
                f"{self.url}: the server answered without choices (content {item.content_id}, offset {item.offset}): "
                "it is not an OpenAI-compatible /completions endpoint, or it failed; check the server's log"
            )
        return choices[0]

    def _logprob(self, value, item: ProbeItem) -> float:
        """A log-probability as the server sent it, refused unless finite and <= 0."""
        if not isinstance(value, (int, float)) or math.isnan(value) or value > 1e-6 or value == math.inf:
            raise InputError(
                f"{self.url}: the server returned the log-probability {value!r} (content {item.content_id}, offset "
                f"{item.offset}); a log-probability is a finite number <= 0: the server or model is broken"
            )
        return float(value)

    def _body(self, prompt: list[int]) -> dict:
        return {
            "model": self.model,
            "prompt": prompt,
            "max_tokens": 1,
            "temperature": 0.0,
            "echo": True,
            "logprobs": 1,
            "return_tokens_as_token_ids": True,
        }

    def _checked(self, logprobs: dict, sent: list[int], item: ProbeItem) -> tuple[list, list]:
        """Echoed tokens and top log-probs, after checking the server read exactly ``sent``."""
        echoed, values, tops = logprobs.get("tokens"), logprobs.get("token_logprobs"), logprobs.get("top_logprobs")
        if not echoed or not values or not tops or len(echoed) < len(sent):
            raise InputError(
                f"{self.url}: the server returned no log-probs for the prompt (content {item.content_id}, offset "
                f"{item.offset}); phasescope needs echo + logprobs on /completions (vLLM: --max-logprobs >= 1)"
            )
        ids = [_token_id(t) for t in echoed[: len(sent)]]
        if ids != sent:
            first = next(i for i, (a, b) in enumerate(zip(ids, sent, strict=True)) if a != b)
            raise InputError(
                f"{self.url}: the server read token {ids[first]} at position {first} where {sent[first]} was sent "
                f"(content {item.content_id}, offset {item.offset}): it re-tokenized the prompt, so positions would "
                "be wrong; serve the model so that it accepts token ids"
            )
        return echoed, tops

    def _candidate(self, item: ProbeItem, name: str, tokens: list[int]) -> tuple[float, bool]:
        sent = item.input_ids + tokens
        logprobs = self._choice(self._post(self._body(sent)), item).get("logprobs") or {}
        _, tops = self._checked(logprobs, sent, item)
        values = logprobs["token_logprobs"]
        at = range(item.answer_pos, item.answer_pos + len(tokens))
        logprob = float(sum(self._logprob(values[i], item) for i in at))
        greedy = all(_token_id(max(tops[i], key=tops[i].get)) == sent[i] for i in at)
        return logprob, greedy

    def _post(self, body: dict) -> dict:
        import httpx

        last = ""
        for attempt in range(self.options.retries + 1):
            if attempt:
                time.sleep(min(self.options.backoff * 2 ** (attempt - 1), 30.0))
            try:
                response = self.client.post(f"{self.url}/completions", json=body)
            except httpx.TransportError as err:
                last = f"{type(err).__name__}: {err}"
                continue
            if response.status_code >= 500:
                last = f"HTTP {response.status_code}: {response.text[:200]}"
                continue
            if response.status_code >= 400:
                raise InputError(
                    f"{self.url}: the server refused the request (HTTP {response.status_code}): {response.text[:300]}"
                )
            try:
                return response.json()
            except ValueError:
                last = f"unreadable JSON: {response.text[:100]!r}"
        raise InputError(
            f"{self.url}: no answer after {self.options.retries + 1} tries (last: {last}); scored records are kept, "
            "rerun the same command to resume"
        )


def _token_id(token: str) -> int:
    if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
        raise InputError(
            f"the server returned token {token!r}, not {TOKEN_PREFIX}N: it ignores return_tokens_as_token_ids"
        )
    return int(token[len(TOKEN_PREFIX) :])


def load(spec: str, options: BackendOptions) -> ServedModel:
    url, _, model = spec[len(PREFIX) :].partition("#")
    if not url.startswith(("http://", "https://")) or not model:
        raise InputError(f"model spec {spec!r}: expected openai:http(s)://HOST[:PORT]/v1#MODEL")
    if not options.tokenizer:
        raise InputError(
            f"{spec}: --tokenizer is required (prompts are tokenized here and sent as ids): the served model's "
            "tokenizer directory, or deepseek-v4 / qwen3"
        )
    tokenizer = load_tokenizer(options.tokenizer)
    info = ModelInfo(
        vocab_size=len(tokenizer),
        fingerprint=f"served:{url}#{model}",
        description=f"openai:{url}#{model}",
        tokenizer=tokenizer,
        bos_id=tokenizer.bos_token_id,
    )
    return ServedModel(url, model, options, info)
