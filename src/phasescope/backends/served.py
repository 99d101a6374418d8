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

``--answers generation`` decides ``correct`` instead from one greedy request of the answer's
length from the prompt alone (as a deployed stack decodes it: one prefill of the prompt's L
tokens, then decode steps); the log-probs stay teacher-forced. Teacher forcing sends the prompt
plus the answer so far (lengths L, L+1, ...), so a serving-stack bug keyed to the prompt's length
shows at several lengths per item: each result carries ``request_lengths`` (the distinct prompt
lengths of its requests) and ``answer_from`` (``teacher-forced`` or ``generation``).

Requests run ``concurrency`` at a time, each within a deadline of ``--timeout`` seconds for the
whole exchange (a server that drips bytes is cut off); 5xx answers, dropped connections,
deadlines and unreadable JSON are retried with exponential backoff, HTTP 429 after the server's
``Retry-After`` (up to 300 s), and the last failure is a clear error. Every answer is checked
before anything is recorded: its shape (lists of equal length, ``token_id:N`` tokens of this
tokenizer) and every log-prob read (a number in [-1e6, 0]); a malformed answer is one error
naming the server, the content and the offset. Records already scored stay in
``records.jsonl`` (the sweep writes per batch), so rerunning resumes. The API key is read from
an environment variable and is never logged or written to the run directory.
"""

from __future__ import annotations

import email.utils
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from phasescope.backends.base import Backend, ModelInfo, greedy_along, load_tokenizer, reproduces, result
from phasescope.backends.options import BackendOptions, model_option, tokenizer_option
from phasescope.errors import InputError
from phasescope.probes.base import ProbeItem

PREFIX = "openai:"
SUMMARY = "an OpenAI-compatible completions server (vLLM), prompts sent as token ids; needs --tokenizer"
EXAMPLE = "openai:http://localhost:8000/v1#MODEL"
PANEL = "Served model (openai:)"


ANSWERS = ("teacher-forced", "generation")  # --answers: the default first


def served_option(default, help: str, **kw):
    return model_option(default, help, panel=PANEL, **kw)


@dataclass(frozen=True)
class Options(BackendOptions):
    tokenizer: str | None = tokenizer_option()
    concurrency: int = served_option(8, "openai: requests in flight at once.", metavar="N", minimum=1)
    timeout: float = served_option(
        120.0, "openai: seconds to wait for one request.", metavar="SECONDS", minimum=0.1, maximum=86400
    )
    retries: int = served_option(
        4,
        "openai: retries (exponential backoff) after a 5xx or a dropped connection.",
        metavar="N",
        minimum=0,
        maximum=100,
    )
    backoff: float = served_option(
        1.0, "openai: seconds before the first retry, doubled each time (at most 30 s).", metavar="SECONDS", minimum=0
    )
    api_key_env: str = served_option(
        "OPENAI_API_KEY", "openai: environment variable holding the API key (never logged or stored).", metavar="VAR"
    )
    answers: str = served_option(
        ANSWERS[0],
        "openai: how `correct` is decided for multi-token answers: teacher-forced (each answer token read after "
        "the prompt + the answer so far, one request per distinct prefix) or generation (one greedy request of the "
        "answer's length from the prompt, as a deployed stack decodes it; the log-probs stay teacher-forced).",
        metavar="MODE",
        measured=True,  # `correct` can differ between the two (a length-keyed stack bug): a resume must not mix them
    )

    def check(self) -> None:
        if self.concurrency < 1 or self.retries < 0 or not self.timeout > 0 or self.backoff < 0:
            raise InputError("--concurrency >= 1, --retries >= 0, --timeout > 0 and --backoff >= 0 are required")
        if self.answers not in ANSWERS:
            raise InputError(f"--answers {self.answers!r} is invalid; allowed: {' | '.join(ANSWERS)}")


TOKEN_PREFIX = "token_id:"
LOGPROB_FLOOR = -1e6  # as the record reader's bound: below it a "log-prob" is a broken number, not a rare token
MAX_RETRY_AFTER = 300.0  # seconds: a longer rate-limit wait ends the sweep (a rerun resumes)
KEPT = "Scored records are kept; rerun the same command to resume"


class FastPathUnavailable(Exception):
    """The server ignores ``logprob_token_ids``: fall back to one request per candidate."""


class NoTokenIds(FastPathUnavailable):
    """The server answers ``logprob_token_ids`` but not ``return_token_ids``: the echo is needed
    to check the ids it read."""


class ServedModel(Backend):
    timed_in_dry_run = False  # a dry run spends no request

    def __init__(self, url: str, model: str, options: Options, info: ModelInfo):
        import httpx

        self.url, self.model, self.options, self.info = url.rstrip("/"), model, options, info
        key = os.environ.get(options.api_key_env, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(headers=headers, timeout=options.timeout)
        self.fast: bool | None = None  # logprob_token_ids: None untried, True works, False unsupported
        self.no_echo: bool | None = None  # logprob_token_ids + return_token_ids: no prompt log-probs needed

    def about(self) -> dict:
        """The server as it describes itself, for manifest.json (numbers from a served model move
        with the engine's version and kernels): vLLM's ``GET /version`` and the model's entry in
        ``GET /v1/models``; a field the server does not offer is None (never an error)."""
        root = self.url.removesuffix("/v1")
        version = self._get(f"{root}/version").get("version")
        models = self._get(f"{self.url}/models").get("data")
        entry = (
            next((m for m in models if isinstance(m, dict) and m.get("id") == self.model), {})
            if isinstance(models, list)
            else {}
        )
        keep = ("root", "owned_by", "max_model_len")
        return {"url": self.url, "model": self.model, "version": version} | {k: entry.get(k) for k in keep}

    def _get(self, url: str) -> dict:
        try:
            answer = self.client.get(url, timeout=min(self.options.timeout, 10.0))
            data = answer.json() if answer.status_code == 200 else {}
        except Exception:  # noqa: BLE001 -- a server that does not describe itself is still scored
            return {}
        return data if isinstance(data, dict) else {}

    def cost(self, records: int, sequences: int, candidates: int, prefixes: int = 0) -> dict:
        """Without echo (the path a server with logprob_token_ids and return_token_ids gets): one
        request per distinct candidate prefix of each item, so one per item when every candidate
        is one token; the echo fallback for a server without logprob_token_ids: one per candidate.
        ``--answers generation`` adds one greedy request per item (record) to either."""
        extra = records if self.options.answers == "generation" else 0
        return {"requests": (prefixes or sequences) + extra, "requests_without_logprob_token_ids": candidates + extra}

    @property
    def scoring_path(self) -> str:
        """How the server is read, as found on the first batch (for the run's notes)."""
        if self.no_echo:
            return "no echo: logprob_token_ids at each candidate prefix, ids checked through return_token_ids"
        if self.fast:
            return "echo: logprob_token_ids in one echoed request per item (the server lacks return_token_ids)"
        return "echo: one echoed request per candidate (the server lacks logprob_token_ids)"

    def score(self, items: list[ProbeItem]) -> list[dict]:
        """One result per item: greedy, logprob_target, logprobs (as ``backends.scoring``), and
        request_lengths (the distinct prompt lengths of the item's requests) and answer_from.

        Tried in order on the first batch, the first that works is kept: no echo (the candidates'
        log-probs at each distinct candidate prefix through ``logprob_token_ids``, the ids the
        server read through ``return_token_ids``), then one echoed request per item
        (single-token candidates), then one echoed request per candidate. With ``--answers
        generation``, one greedy request per item then decides ``greedy`` (the log-probs stay)."""
        results = self._teacher_forced(items)
        if self.options.answers != "generation":
            return [r | {"answer_from": "teacher-forced"} for r in results]
        with ThreadPoolExecutor(max_workers=self.options.concurrency) as pool:
            generated = list(pool.map(self._answer_generated, items))
        return [
            r
            | {
                "greedy": reproduces(item, answer),  # a stop before the target's length is wrong
                "answer_ids": answer,
                "answer_from": "generation",
                "request_lengths": sorted({*r["request_lengths"], len(item.input_ids)}),
            }
            for item, r, answer in zip(items, results, generated, strict=True)
        ]

    def _answer_generated(self, item: ProbeItem) -> list[int]:
        """What greedy decoding from the prompt alone generates, as many tokens as the target has."""
        target = list(item.candidates[item.target])
        return self._greedy(item, len(target), check_read=bool(self.no_echo))

    def _stopped(self) -> str:
        return (
            f"{self.url}: the server stopped answering logprob_token_ids, which it answered earlier in this run (was "
            "it restarted with another version or options?); the rest would be scored another way than the records "
            f"before, so nothing more is scored. {KEPT} once the server answers logprob_token_ids again (vLLM: "
            "serve it as before)"
        )

    def _teacher_forced(self, items: list[ProbeItem]) -> list[dict]:
        """``score`` without ``--answers generation``: every token read after the prompt + the
        answer so far."""
        if self.no_echo is not False:
            try:
                with ThreadPoolExecutor(max_workers=self.options.concurrency) as pool:
                    results = list(pool.map(self._item_no_echo, items))
                self.no_echo = True
                return results
            except FastPathUnavailable as missing:
                if self.no_echo:
                    raise InputError(self._stopped()) from None
                self.no_echo = False
                if not isinstance(missing, NoTokenIds):
                    self.fast = False  # no logprob_token_ids at all: the echoed single request cannot work either
        if self.fast is not False and all(len(c) == 1 for it in items for c in it.candidates.values()):
            try:
                with ThreadPoolExecutor(max_workers=self.options.concurrency) as pool:
                    results = list(pool.map(self._item_fast, items))
                self.fast = True
                return results
            except FastPathUnavailable:
                if self.fast:  # it worked before: the server changed its answers, not a missing feature
                    raise InputError(self._stopped()) from None
                self.fast = False  # this server does not support it: one request per candidate
        jobs = [(item, name, tokens) for item in items for name, tokens in item.candidates.items()]
        with ThreadPoolExecutor(max_workers=self.options.concurrency) as pool:
            answers = list(pool.map(lambda job: self._candidate(*job), jobs))
        results = {
            id(item): {
                "logprobs": {},
                "greedy": False,
                "request_lengths": sorted({len(item.input_ids) + len(c) for c in item.candidates.values()}),
            }
            for item in items
        }
        for (item, name, tokens), (logprob, argmaxes) in zip(jobs, answers, strict=True):
            scored = results[id(item)]
            scored["logprobs"][name] = logprob
            if name == item.target:
                scored["logprob_target"] = logprob
                if argmaxes is not None:
                    scored["answer_ids"] = greedy_along(argmaxes, tokens)
                    scored["greedy"] = reproduces(item, scored["answer_ids"])
        return [results[id(item)] for item in items]

    def _item_fast(self, item: ProbeItem) -> dict:
        """Single-token candidates in one request: vLLM's ``logprob_token_ids`` returns their
        log-probs at the generated position; greedy decoding's token is the argmax."""
        sent = item.input_ids
        wanted = sorted({tokens[0] for tokens in item.candidates.values()})
        body = self._body(sent) | {"logprob_token_ids": wanted}
        ids, _, tops = self._echo(self._post(body, item), sent, item)
        top = tops[len(sent)] if len(tops) > len(sent) else None
        if top is None or len(ids) <= len(sent):
            raise FastPathUnavailable
        top = self._top(top, item)
        if any(t not in top for t in wanted):
            raise FastPathUnavailable
        scores = {name: top[tokens[0]] for name, tokens in item.candidates.items()}
        return result(item, scores, [ids[len(sent)]]) | {"request_lengths": [len(sent)]}

    def _item_no_echo(self, item: ProbeItem) -> dict:
        """Every candidate teacher-forced without echo: one request per distinct candidate prefix
        (the prompt alone for the first tokens), each asking the log-probs of the tokens that
        follow it; the server's prefix cache serves the shared prompt."""
        following: dict[tuple, set[int]] = {}
        for tokens in item.candidates.values():
            for j, token in enumerate(tokens):
                following.setdefault(tuple(tokens[:j]), set()).add(token)
        answers = {prefix: self._next(item, list(prefix), sorted(wanted)) for prefix, wanted in following.items()}
        scores = {
            name: float(sum(answers[tuple(tokens[:j])][1][t] for j, t in enumerate(tokens)))
            for name, tokens in item.candidates.items()
        }
        target = item.candidates[item.target]
        answer = greedy_along([answers[tuple(target[:j])][0] for j in range(len(target))], target)
        return result(item, scores, answer) | {
            "request_lengths": sorted({len(item.input_ids) + len(prefix) for prefix in following})
        }

    def _next(self, item: ProbeItem, extra: list[int], wanted: list[int]) -> tuple[int, dict[int, float]]:
        """(greedy next token, {token: log-prob} of ``wanted``) after the prompt + ``extra``."""
        sent = item.input_ids + extra
        body = self._body(sent) | {"echo": False, "logprob_token_ids": wanted, "return_token_ids": True}
        choice = self._choice(self._post(body, item), item)
        read = choice.get("prompt_token_ids")
        if read is None:
            raise NoTokenIds
        self._check_read(read, sent, item)
        tokens, values, tops = self._lists(choice.get("logprobs"), item, empty_is_missing=False)
        if not len(tokens) == len(values) == len(tops) == 1:
            raise self._malformed(
                f"{len(tokens)} tokens, {len(values)} log-probs and {len(tops)} top lists for one generated token", item
            )
        generated, top = self._token_id(tokens[0], item), self._top(tops[0], item)
        if any(t not in top for t in wanted):
            raise FastPathUnavailable
        return generated, top

    def _candidate(self, item: ProbeItem, name: str, tokens: list[int]) -> tuple[float, list[int] | None]:
        """(the candidate's log-prob, the argmax at each of its positions; None where the server
        gave no top token there)."""
        sent = item.input_ids + tokens
        _, values, tops = self._echo(self._post(self._body(sent), item), sent, item)
        at = range(item.answer_pos, item.answer_pos + len(tokens))
        logprob = float(sum(self._logprob(values[i], item) for i in at))
        argmaxes = []
        for i in at:
            top = self._top(tops[i], item)
            if not top:
                return logprob, None
            argmaxes.append(max(top, key=top.get))
        return logprob, argmaxes

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

    # -- reading an answer: every shape checked, a malformed one named ----------------------------

    def _malformed(self, what: str, item: ProbeItem) -> InputError:
        return InputError(
            f"{self.url}: the server's answer is malformed ({what}; content {item.content_id}, offset {item.offset}); "
            f"nothing was recorded for it: the server is not vLLM-compatible or is broken, check its log. {KEPT}"
        )

    def _echo(self, answer, sent: list[int], item: ProbeItem) -> tuple[list[int], list, list]:
        """(echoed ids, prompt log-probs, top log-probs), after checking their shapes and that the
        server read exactly ``sent``."""
        echoed, values, tops = self._lists(self._choice(answer, item).get("logprobs"), item, empty_is_missing=True)
        if not len(echoed) == len(values) == len(tops) or len(echoed) < len(sent):
            raise self._malformed(
                f"{len(echoed)} tokens, {len(values)} log-probs and {len(tops)} top lists for a prompt of "
                f"{len(sent)} tokens",
                item,
            )
        ids = [self._token_id(t, item) for t in echoed]
        self._check_read(ids[: len(sent)], sent, item)
        return ids, values, tops

    def _lists(self, logprobs, item: ProbeItem, empty_is_missing: bool) -> tuple[list, list, list]:
        """``tokens``, ``token_logprobs``, ``top_logprobs`` of an answer's ``logprobs``, each a list
        (their lengths are the caller's to check: a whole echoed prompt, or one generated token)."""
        if logprobs is not None and not isinstance(logprobs, dict):
            raise self._malformed(f"logprobs is a {type(logprobs).__name__}, not an object", item)
        lists = [(logprobs or {}).get(k) for k in ("tokens", "token_logprobs", "top_logprobs")]
        if logprobs is None or (empty_is_missing and not all(lists)):
            raise InputError(
                f"{self.url}: the server returned no log-probs (content {item.content_id}, offset {item.offset}); "
                "phasescope needs logprobs on /completions (vLLM: --max-logprobs >= 1)"
            )
        if not all(isinstance(x, list) for x in lists):
            raise self._malformed("tokens, token_logprobs and top_logprobs must be lists", item)
        return tuple(lists)

    def _check_read(self, read: list, sent: list[int], item: ProbeItem) -> None:
        """The ids the server read (echoed, or ``prompt_token_ids``) must be the ids sent."""
        if read == sent:
            return
        common = min(len(read), len(sent))
        first = next((i for i in range(common) if read[i] != sent[i]), common)
        got = read[first] if first < len(read) else "nothing"
        raise InputError(
            f"{self.url}: the server read token {got} at position {first} where "
            f"{sent[first] if first < len(sent) else 'nothing'} was sent (content {item.content_id}, offset "
            f"{item.offset}): it re-tokenized the prompt, so positions would be wrong; serve the model so that it "
            "accepts token ids"
        )

    def _choice(self, answer, item: ProbeItem) -> dict:
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise InputError(
                f"{self.url}: the server answered without choices (content {item.content_id}, offset {item.offset}): "
                f"it is not an OpenAI-compatible /completions endpoint, or it failed; check the server's log. {KEPT}"
            )
        return choices[0]

    def generate(self, item: ProbeItem) -> list[int]:
        """Greedy continuation ids of ``item`` (its ``generate``), cut where the local loop would stop."""
        out: list[int] = []
        for token in self._greedy(item, item.generate.max_tokens):
            out.append(token)
            if item.generate.done(out):
                break
        return out

    def _greedy(self, item: ProbeItem, max_tokens: int, check_read: bool = False) -> list[int]:
        """The ids greedy decoding (temperature 0) generates after ``item``'s prompt, at most
        ``max_tokens`` (fewer where the server stops); ``check_read``: ask ``return_token_ids``
        and check that the server read the ids sent."""
        body = self._body(item.input_ids) | {"max_tokens": max_tokens, "echo": False}
        if check_read:
            body["return_token_ids"] = True
        choice = self._choice(self._post(body, item), item)
        if check_read and choice.get("prompt_token_ids") is not None:
            self._check_read(choice["prompt_token_ids"], item.input_ids, item)
        logprobs = choice.get("logprobs")
        tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
        if not isinstance(tokens, list):
            raise InputError(
                f"{self.url}: the server returned no generated tokens (content {item.content_id}, offset "
                f"{item.offset}); phasescope needs logprobs with return_tokens_as_token_ids (vLLM)"
            )
        if len(tokens) > max_tokens:
            raise self._malformed(f"{len(tokens)} tokens generated where at most {max_tokens} were asked", item)
        return [self._token_id(token, item) for token in tokens]

    def _token_id(self, token, item: ProbeItem) -> int:
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            raise InputError(
                f"{self.url}: the server returned token {token!r}, not {TOKEN_PREFIX}N (content {item.content_id}, "
                f"offset {item.offset}): it ignores return_tokens_as_token_ids; serve the model with vLLM"
            )
        digits = token[len(TOKEN_PREFIX) :]
        if not digits.isdigit() or int(digits) >= (self.info.vocab_size or 1 << 62):
            raise self._malformed(f"token {token!r} is not a token id of this tokenizer", item)
        return int(digits)

    def _top(self, top, item: ProbeItem) -> dict[int, float]:
        """A position's top log-probs ``{"token_id:N": logprob}`` as ``{N: logprob}``, each checked."""
        if not isinstance(top, dict):
            raise self._malformed(f"a top_logprobs entry is {top!r}, not an object", item)
        return {self._token_id(k, item): self._logprob(v, item) for k, v in top.items()}

    def _logprob(self, value, item: ProbeItem) -> float:
        """A log-probability as the server sent it, refused unless a number in [LOGPROB_FLOOR, 0]."""
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or not LOGPROB_FLOOR <= value <= 1e-6:
            raise InputError(
                f"{self.url}: the server returned the log-probability {value!r} (content {item.content_id}, offset "
                f"{item.offset}); a log-probability is a number in [{LOGPROB_FLOOR:g}, 0]: the server or model is "
                f"broken, nothing was recorded for it. {KEPT}"
            )
        return min(float(value), 0.0)

    # -- sending: a deadline per request, retries with backoff, Retry-After honoured ---------------

    def _post(self, body: dict, item: ProbeItem) -> dict:
        last = ""
        wait = 0.0
        for attempt in range(self.options.retries + 1):
            if attempt:
                time.sleep(max(wait, min(self.options.backoff * 2 ** (attempt - 1), 30.0)))
            status, text, retry_after, location = self._send(body)
            wait = 0.0
            if status is None or status >= 500:
                last = text if status is None else f"HTTP {status}: {text[:200]}"
                continue
            if status == 429:
                wait = retry_after if retry_after is not None else 0.0
                if wait > MAX_RETRY_AFTER:
                    raise InputError(
                        f"{self.url}: the server is rate-limiting (HTTP 429) and asks to wait {wait:.0f} s, longer "
                        f"than phasescope waits ({MAX_RETRY_AFTER:.0f} s; content {item.content_id}, offset "
                        f"{item.offset}). {KEPT} once the limit has passed"
                    )
                last = "HTTP 429 (rate limited)" + (f", Retry-After {wait:g} s" if retry_after is not None else "")
                continue
            if 300 <= status < 400:
                raise InputError(self._redirected(status, location, item))
            if status >= 400:
                raise InputError(
                    f"{self.url}: the server refused the request (HTTP {status}; content {item.content_id}, offset "
                    f"{item.offset}): {text[:300]}. {KEPT} once it is fixed"
                )
            try:
                return json.loads(text)
            except ValueError:
                last = f"unreadable JSON: {text[:100]!r}"
        raise InputError(
            f"{self.url}: no answer after {self.options.retries + 1} tries (content {item.content_id}, offset "
            f"{item.offset}; last: {last}). {KEPT}"
        )

    def _redirected(self, status: int, location: str | None, item: ProbeItem) -> str:
        """A redirect is not followed (a POST's body is not resent to a place the user did not name):
        say where the server points, as the URL to pass instead."""
        where = f" to {location}" if location else ""
        base = location.removesuffix("/completions") if location else None
        fix = f"pass the address it points to, openai:{base}#{self.model}" if base else "pass the server's own address"
        return (
            f"{self.url}: the server answered HTTP {status}, a redirect{where} (content {item.content_id}, offset "
            f"{item.offset}); phasescope does not follow redirects: {fix}. {KEPT}"
        )

    def _send(self, body: dict) -> tuple[int | None, str, float | None, str | None]:
        """(HTTP status or None for no answer, body text or the failure, Retry-After seconds, a
        redirect's Location), the whole exchange within ``--timeout`` seconds: a server that drips
        bytes is cut off."""
        import httpx

        deadline = time.monotonic() + self.options.timeout
        try:
            with self.client.stream("POST", f"{self.url}/completions", json=body) as response:
                chunks = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        return None, f"no complete answer within --timeout {self.options.timeout:g} s", None, None
                text = b"".join(chunks).decode("utf-8", errors="replace")
                headers = response.headers
                return response.status_code, text, _retry_after(headers.get("retry-after")), headers.get("location")
        except httpx.TimeoutException:
            return None, f"no complete answer within --timeout {self.options.timeout:g} s", None, None
        except httpx.TransportError as err:
            return None, f"{type(err).__name__}: {err}", None, None


def _retry_after(header: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds or an HTTP date), None when absent or unreadable."""
    if not header:
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def load(spec: str, options: Options) -> ServedModel:
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
