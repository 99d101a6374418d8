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
``Retry-After`` (up to 300 s), and the last failure is a clear error (``backends/transport.py``).
Every answer is checked before anything is recorded (``backends/vllm_protocol.py``): its shape
(lists of equal length, ``token_id:N`` tokens of this tokenizer) -- a malformed answer is one
error naming the server, the content and the offset -- and what it says: an answer that broke
the protocol (other prompt ids than sent, missing or impossible log-probs, a generation cut for
length, a token that is not the top of its own log-probs) is a finding, recorded in
``RUN/protocol.jsonl`` and never scored; ``--protocol-faults N`` such answers are recorded before
the sweep stops (0: the first stops it). Records already scored stay in
``records.jsonl`` (the sweep writes per batch), so rerunning resumes. The API key is read from
an environment variable and is never logged or written to the run directory.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from phasescope.backends import vllm_protocol as vllm
from phasescope.backends.base import Backend, ModelInfo, Scored, greedy_along, load_tokenizer, reproduces, result
from phasescope.backends.options import BackendOptions, model_option, tokenizer_option
from phasescope.backends.transport import KEPT, Transport
from phasescope.backends.vllm_protocol import (
    FastPathUnavailable,
    Malformed,
    NotCompatible,
    NoTokenIds,
    ProtocolFault,
)
from phasescope.errors import InputError
from phasescope.probes.base import ProbeItem
from phasescope.specs import SERVED, ModelGeometry

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
    protocol_faults: int = served_option(
        0,
        "openai: answers that may break the protocol (a short generation, other prompt ids than sent, missing or "
        "non-finite log-probs) before the sweep stops; each is recorded in RUN/protocol.jsonl as a finding, never "
        "as a wrong answer (phasescope check records them all).",
        metavar="N",
        minimum=0,
    )

    def check(self) -> None:
        if self.concurrency < 1 or self.retries < 0 or not self.timeout > 0 or self.backoff < 0:
            raise InputError("--concurrency >= 1, --retries >= 0, --timeout > 0 and --backoff >= 0 are required")
        if self.protocol_faults < 0:
            raise InputError(f"--protocol-faults {self.protocol_faults!r} is invalid; allowed: a count >= 0")
        if self.answers not in ANSWERS:
            raise InputError(f"--answers {self.answers!r} is invalid; allowed: {' | '.join(ANSWERS)}")


class ServedModel(Backend):
    """A model behind a completions server: ``Transport`` sends, ``vllm_protocol`` writes the
    bodies and reads the answers, this class chooses the requests for each item and turns an
    answer that broke the protocol into a finding (``protocol`` in its result) instead of a score."""

    timed_in_dry_run = False  # a dry run spends no request

    def __init__(self, url: str, model: str, options: Options, info: ModelInfo, say=None):
        self.url, self.model, self.options, self.info = url.rstrip("/"), model, options, info
        self.transport = Transport(
            self.url,
            timeout=options.timeout,
            retries=options.retries,
            backoff=options.backoff,
            api_key_env=options.api_key_env,
            model=model,
            say=say,
        )
        self.protocol_faults_allowed = options.protocol_faults
        self.fast: bool | None = None  # logprob_token_ids: None untried, True works, False unsupported
        self.no_echo: bool | None = None  # logprob_token_ids + return_token_ids: no prompt log-probs needed
        self.fell_back: str | None = None  # why the echo was asked for (said if the server then refuses it)

    def about(self) -> dict:
        """The server as it describes itself, for manifest.json (numbers from a served model move
        with the engine's version and kernels): vLLM's ``GET /version`` and the model's entry in
        ``GET /v1/models``; a field the server does not offer is None (never an error)."""
        root = self.url.removesuffix("/v1")
        version = self.transport.get(f"{root}/version").get("version")
        models = self.transport.get(f"{self.url}/models").get("data")
        entry = (
            next((m for m in models if isinstance(m, dict) and m.get("id") == self.model), {})
            if isinstance(models, list)
            else {}
        )
        keep = ("root", "owned_by", "max_model_len")
        return {"url": self.url, "model": self.model, "version": version} | {k: entry.get(k) for k in keep}

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

    # -- scoring ---------------------------------------------------------------------------------

    def score(self, items: list[ProbeItem]) -> list[Scored]:
        """One result per item: greedy, logprob_target, logprobs (as ``backends.scoring``), and
        request_lengths (the distinct prompt lengths of the item's requests) and answer_from; or,
        for an item whose answer broke the protocol, ``{"protocol": {"kind", "message"}}``.

        Tried in order on the first batch, the first that works is kept: no echo (the candidates'
        log-probs at each distinct candidate prefix through ``logprob_token_ids``, the ids the
        server read through ``return_token_ids``), then one echoed request per item
        (single-token candidates), then one echoed request per candidate. With ``--answers
        generation``, one greedy request per item then decides ``greedy`` (the log-probs stay)."""
        results = self._teacher_forced(items)
        if self.options.answers != "generation":
            return [r if "protocol" in r else r | {"answer_from": "teacher-forced"} for r in results]
        generated = self._each(self._answer_generated, items)
        out = []
        for item, r, answer in zip(items, results, generated, strict=True):
            if "protocol" in r or isinstance(answer, dict):
                out.append(r if "protocol" in r else answer)
                continue
            out.append(
                r
                | {
                    "greedy": reproduces(item, answer),  # a stop before the target's length is wrong
                    "answer_ids": answer,
                    "answer_from": "generation",
                    "request_lengths": sorted({*r["request_lengths"], len(item.input_ids)}),
                }
            )
        return out

    def _each(self, read, items: list[ProbeItem]) -> list:
        """``read(item)`` for every item, ``concurrency`` at a time; an item whose answer broke the
        protocol gets ``{"protocol": ...}`` instead (a missing feature still stops the batch)."""

        def one(item):
            try:
                return read(item)
            except ProtocolFault as fault:
                return {"protocol": {"kind": fault.kind, "message": self._where(fault.detail, item)}}

        with ThreadPoolExecutor(max_workers=self.options.concurrency) as pool:
            return list(pool.map(one, items))

    def _answer_generated(self, item: ProbeItem) -> list[int]:
        """What greedy decoding from the prompt alone generates, as many tokens as the target has."""
        target = list(item.candidates[item.target])
        return self._greedy(item, len(target), check_read=bool(self.no_echo))

    def _stopped(self, missing: Exception | None = None) -> str:
        field = "prompt_token_ids (return_token_ids)" if isinstance(missing, NoTokenIds) else "logprob_token_ids"
        return (
            f"{self.url}: the server stopped answering {field}, which it answered earlier in this run (was it "
            "restarted with another version or options?); the rest would be scored another way than the records "
            f"before, so nothing more is scored. {KEPT} once the server answers {field} again (vLLM: serve it as "
            "before)"
        )

    def _teacher_forced(self, items: list[ProbeItem]) -> list[dict]:
        """``score`` without ``--answers generation``: every token read after the prompt + the
        answer so far. A server that refuses the echo it was moved to is told why it was moved."""
        try:
            return self._read_teacher_forced(items)
        except InputError as err:
            if self.no_echo is False and self.fell_back and "refused the request" in str(err):
                raise InputError(f"{err} (phasescope asked for the echo because {self.fell_back})") from None
            raise

    def _read_teacher_forced(self, items: list[ProbeItem]) -> list[dict]:
        if self.no_echo is not False:
            try:
                results = self._each(self._item_no_echo, items)
                self.no_echo = True
                return results
            except FastPathUnavailable as missing:
                if self.no_echo:
                    raise InputError(self._stopped(missing)) from None
                self.no_echo = False
                self.fell_back = (
                    "its first answer had no prompt_token_ids (return_token_ids)"
                    if isinstance(missing, NoTokenIds)
                    else "its first answer lacked the asked logprob_token_ids"
                )
                if not isinstance(missing, NoTokenIds):
                    self.fast = False  # no logprob_token_ids at all: the echoed single request cannot work either
        if self.fast is not False and all(len(c) == 1 for it in items for c in it.candidates.values()):
            try:
                results = self._each(self._item_fast, items)
                self.fast = True
                return results
            except FastPathUnavailable:
                if self.fast:  # it worked before: the server changed its answers, not a missing feature
                    raise InputError(self._stopped()) from None
                self.fast = False  # this server does not support it: one request per candidate
        return self._each(self._item_per_candidate, items)

    def _item_per_candidate(self, item: ProbeItem) -> dict:
        """One echoed request per candidate (a server without logprob_token_ids)."""
        scored = {
            "logprobs": {},
            "greedy": False,
            "request_lengths": sorted({len(item.input_ids) + len(c) for c in item.candidates.values()}),
        }
        for name, tokens in item.candidates.items():
            logprob, argmaxes, values = self._candidate(item, tokens)
            scored["logprobs"][name] = logprob
            if name == item.target:
                scored["logprob_target"] = logprob
                if argmaxes is not None:
                    scored["answer_ids"] = greedy_along(argmaxes, tokens)
                    scored["greedy"] = reproduces(item, scored["answer_ids"])
                    if len(tokens) > 1:
                        scored["token_logprobs"] = values
                        scored["token_correct"] = [a == t for a, t in zip(argmaxes, tokens, strict=True)]
        return scored

    def _item_fast(self, item: ProbeItem) -> dict:
        """Single-token candidates in one request: vLLM's ``logprob_token_ids`` returns their
        log-probs at the generated position; greedy decoding's token is the argmax."""
        sent = item.input_ids
        wanted = sorted({tokens[0] for tokens in item.candidates.values()})
        ids, _, tops = self._read(
            lambda: vllm.read_echo(self._post(vllm.echo_body(self.model, sent, wanted), item), sent, self.vocab), item
        )
        top = tops[len(sent)] if len(tops) > len(sent) else None
        if top is None or len(ids) <= len(sent):
            raise FastPathUnavailable
        top = self._read(lambda: vllm.top(top, self.vocab), item)
        if any(t not in top for t in wanted):
            raise FastPathUnavailable
        generated = ids[len(sent)]
        vllm.consistent(generated, top.get(generated, max(top.values())), top)
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
        tops = [answers[tuple(target[:j])][0] for j in range(len(target))]
        steps = [(answers[tuple(target[:j])][1][t], tops[j]) for j, t in enumerate(target)]
        return result(item, scores, greedy_along(tops, target), steps) | {
            "request_lengths": sorted({len(item.input_ids) + len(prefix) for prefix in following})
        }

    def _next(self, item: ProbeItem, extra: list[int], wanted: list[int]) -> tuple[int, dict[int, float]]:
        """(greedy next token, {token: log-prob} of ``wanted``) after the prompt + ``extra``."""
        sent = item.input_ids + extra
        answer = self._post(vllm.next_body(self.model, sent, wanted), item)
        return self._read(lambda: vllm.read_next(answer, sent, wanted, self.vocab), item)

    def _candidate(self, item: ProbeItem, tokens: list[int]) -> tuple[float, list[int] | None, list[float]]:
        """(the candidate's log-prob, the argmax at each of its positions -- None where the server
        gave no top token there --, each position's log-prob)."""
        sent = item.input_ids + tokens
        _, values, tops = self._read(
            lambda: vllm.read_echo(self._post(vllm.echo_body(self.model, sent), item), sent, self.vocab), item
        )
        at = range(item.answer_pos, item.answer_pos + len(tokens))
        each = [self._read(lambda i=i: vllm.logprob(values[i]), item) for i in at]
        argmaxes = []
        for i in at:
            top = self._read(lambda i=i: vllm.top(tops[i], self.vocab), item)
            if not top:
                return float(sum(each)), None, each
            argmaxes.append(max(top, key=top.get))
        return float(sum(each)), argmaxes, each

    # -- generation ------------------------------------------------------------------------------

    def generate(self, items: list[ProbeItem]) -> list[list[int]]:
        """Greedy continuation ids of each item (its ``generate``), cut where the local loop would stop."""
        out = []
        for item in items:
            tokens: list[int] = []
            for token in self._greedy(item, item.generate.max_tokens):
                tokens.append(token)
                if item.generate.done(tokens):
                    break
            out.append(tokens)
        return out

    def _greedy(self, item: ProbeItem, max_tokens: int, check_read: bool = False) -> list[int]:
        """The ids greedy decoding (temperature 0) generates after ``item``'s prompt, at most
        ``max_tokens`` (fewer where the server stops); ``check_read``: ask ``return_token_ids``
        and check that the server read the ids sent."""
        body = vllm.generate_body(self.model, item.input_ids, max_tokens, check_read)
        answer = self._post(body, item)
        return self._read(lambda: vllm.read_generated(answer, item.input_ids, max_tokens, check_read, self.vocab), item)

    # -- the transport and the adapter's errors, with the server and the place ---------------------

    @property
    def vocab(self) -> int | None:
        return self.info.vocab_size

    def _post(self, body: dict, item: ProbeItem):
        return self.transport.post("completions", body, f"content {item.content_id}, offset {item.offset}")

    def _where(self, detail: str, item: ProbeItem) -> str:
        return f"{self.url}: {detail} (content {item.content_id}, offset {item.offset})"

    def _read(self, read, item: ProbeItem):
        """``read()``, its malformed or incompatible answer an error naming the server and the place
        (a protocol fault passes on to ``_each``, which records it)."""
        try:
            return read()
        except Malformed as err:
            raise InputError(
                f"{self.url}: the server's answer is malformed ({err.detail}; content {item.content_id}, offset "
                f"{item.offset}); nothing was recorded for it: the server is not vLLM-compatible or is broken, check "
                f"its log. {KEPT}"
            ) from None
        except NotCompatible as err:
            raise InputError(f"{self._where(err.detail, item)}. {KEPT}") from None


def load(spec: str, options: Options) -> ServedModel:
    url, _, model = spec[len(PREFIX) :].partition("#")
    if not url.startswith(("http://", "https://")) or not model:
        raise InputError(f"model spec {spec!r}: expected openai:http(s)://HOST[:PORT]/v1#MODEL")
    if not options.tokenizer:
        raise InputError(
            f"{spec}: --tokenizer is required (prompts are tokenized here and sent as ids): the served model's "
            "tokenizer directory, or deepseek-v4 / qwen3"
        )
    served = ServedModel(url, model, options, ModelInfo(vocab_size=None))  # its info once the tokenizer is read
    served.transport.preflight()  # before the tokenizer and the probe: a wrong address is said in seconds
    tokenizer = load_tokenizer(options.tokenizer)
    served.info = ModelInfo(
        vocab_size=len(tokenizer),
        fingerprint=f"served:{url}#{model}",
        description=f"openai:{url}#{model}",
        tokenizer=tokenizer,
        bos_id=tokenizer.bos_token_id,
        geometry=ModelGeometry(source=SERVED),  # a server does not say how it compresses its cache
    )
    return served
