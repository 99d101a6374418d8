"""The completions protocol as vLLM speaks it: the request bodies phasescope sends and the reading
of each answer, every shape checked (``backends/served.py`` sends them through
``backends/transport.py``). A new stack (SGLang's native endpoint, say) is a module like this one.

Three requests:

* **next token** (``next_body``): the prompt (+ a candidate's first tokens) with
  ``logprob_token_ids`` (the tokens whose log-probs are wanted), ``return_token_ids`` and no echo:
  the generated token, the asked tokens' log-probs, the ids the server read;
* **echo** (``echo_body``): the prompt echoed with its log-probs (servers without
  ``return_token_ids`` or ``logprob_token_ids``);
* **generation** (``generate_body``): greedy decoding from the prompt, as a deployed stack answers.

What an answer can be, besides right:

* ``Malformed``: not the shapes vLLM sends (lists of different lengths, a top entry that is not an
  object, a token id past the vocabulary): an error, nothing recorded;
* ``NotCompatible``: not an OpenAI completions answer with token ids at all (no choices, text
  tokens): an error saying how to serve the model;
* ``ProtocolFault``: well formed, but not an answer to what was sent -- the prompt ids read differ
  from those sent (``ids``), log-probs missing, non-finite or impossible (``logprobs``), a generation
  shorter than asked that says it stopped for length (``short``), a generated token that is not the
  top of its own log-probs (``inconsistent``), a key twice in one object (``duplicate``). A serving
  stack's bug, recorded as a finding (``RUN/protocol.jsonl``), never scored as a wrong answer.
* ``FastPathUnavailable`` / ``NoTokenIds``: the server lacks ``logprob_token_ids`` /
  ``return_token_ids``; the backend falls back to the echo.
"""

from __future__ import annotations

import math

TOKEN_PREFIX = "token_id:"
LOGPROB_FLOOR = -1e6  # as the record reader's bound: below it a "log-prob" is a broken number, not a rare token
CERTAIN = -1e-6  # a log-prob above this is probability 1
SUM_SLACK = 0.02  # a server's rounding: asked tokens' probabilities may sum a little above 1, not more


class AnswerError(Exception):
    """What is wrong with an answer, in words without the server or the place (the backend adds them)."""

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class Malformed(AnswerError):
    pass


class NotCompatible(AnswerError):
    pass


class ProtocolFault(AnswerError):
    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind = kind


class FastPathUnavailable(Exception):
    """The server ignores ``logprob_token_ids``: fall back to one request per candidate."""


class NoTokenIds(FastPathUnavailable):
    """The server answers ``logprob_token_ids`` but not ``return_token_ids``: the echo is needed
    to check the ids it read."""


# -- request bodies --------------------------------------------------------------------------------


def base_body(model: str, prompt: list[int]) -> dict:
    return {
        "model": model,
        "prompt": prompt,
        "max_tokens": 1,
        "temperature": 0.0,
        "echo": True,
        "logprobs": 1,
        "return_tokens_as_token_ids": True,
    }


def next_body(model: str, prompt: list[int], wanted: list[int]) -> dict:
    return base_body(model, prompt) | {"echo": False, "logprob_token_ids": wanted, "return_token_ids": True}


def echo_body(model: str, prompt: list[int], wanted: list[int] | None = None) -> dict:
    body = base_body(model, prompt)
    return body | {"logprob_token_ids": wanted} if wanted else body


def generate_body(model: str, prompt: list[int], max_tokens: int, check_read: bool) -> dict:
    body = base_body(model, prompt) | {"max_tokens": max_tokens, "echo": False}
    return body | {"return_token_ids": True} if check_read else body


# -- reading answers -------------------------------------------------------------------------------


def choice(answer) -> dict:
    """The answer's first choice (by its ``index`` when the server gives one)."""
    if isinstance(answer, dict) and "__duplicate_key__" in answer:
        raise ProtocolFault("duplicate", f"the answer is not one JSON reading: {answer['__duplicate_key__']}")
    choices = answer.get("choices") if isinstance(answer, dict) else None
    if not isinstance(choices, list) or not choices or not all(isinstance(c, dict) for c in choices):
        raise NotCompatible(
            "the server answered without choices: it is not an OpenAI-compatible /completions endpoint, or it failed; "
            "check the server's log"
        )
    indexed = [c for c in choices if c.get("index", 0) == 0]
    return indexed[0] if indexed else choices[0]


def lists(logprobs, empty_is_missing: bool) -> tuple[list, list, list]:
    """``tokens``, ``token_logprobs``, ``top_logprobs`` of an answer's ``logprobs``, each a list."""
    if logprobs is not None and not isinstance(logprobs, dict):
        raise Malformed(f"logprobs is a {type(logprobs).__name__}, not an object")
    found = [(logprobs or {}).get(k) for k in ("tokens", "token_logprobs", "top_logprobs")]
    if logprobs is None or (empty_is_missing and not all(found)):
        raise ProtocolFault(
            "logprobs",
            "the server returned no log-probs; phasescope needs logprobs on /completions (vLLM: --max-logprobs >= 1)",
        )
    if not all(isinstance(x, list) for x in found):
        raise Malformed("tokens, token_logprobs and top_logprobs must be lists")
    return tuple(found)


def token_id(token, vocab_size: int | None) -> int:
    if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
        raise NotCompatible(
            f"the server returned token {token!r}, not {TOKEN_PREFIX}N: it ignores return_tokens_as_token_ids; "
            "serve the model with vLLM"
        )
    digits = token[len(TOKEN_PREFIX) :]
    if not digits.isdigit() or int(digits) >= (vocab_size or 1 << 62):
        raise Malformed(f"token {token!r} is not a token id of this tokenizer")
    return int(digits)


def logprob(value) -> float:
    """A log-probability as the server sent it: a number in [LOGPROB_FLOOR, 0]."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or not LOGPROB_FLOOR <= value <= 1e-6:
        raise ProtocolFault(
            "logprobs",
            f"the server returned the log-probability {value!r}; a log-probability is a number in "
            f"[{LOGPROB_FLOOR:g}, 0]: the server or model is broken",
        )
    return min(float(value), 0.0)


def top(entry, vocab_size: int | None) -> dict[int, float]:
    """A position's top log-probs ``{"token_id:N": logprob}`` as ``{N: logprob}``, each checked."""
    if not isinstance(entry, dict):
        raise Malformed(f"a top_logprobs entry is {entry!r}, not an object")
    out = {token_id(k, vocab_size): logprob(v) for k, v in entry.items()}
    total = math.fsum(math.exp(v) for v in out.values())
    if total > 1 + SUM_SLACK:  # distinct tokens of one distribution: their probabilities cannot sum above 1
        at_one = sum(v > CERTAIN for v in out.values())
        what = f"{at_one} tokens at probability 1" if at_one > 1 else f"probabilities summing to {total:.3g}"
        raise ProtocolFault("logprobs", f"{what} in one position: they are not one distribution's log-probs")
    return out


def check_read(read, sent: list[int]) -> None:
    """The ids the server read (echoed, or ``prompt_token_ids``) must be the ids sent."""
    if read == sent:
        return
    if not isinstance(read, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in read):
        raise ProtocolFault("ids", f"the server returned the prompt's ids as {str(read)[:60]}, not a list of ids")
    common = min(len(read), len(sent))
    first = next((i for i in range(common) if read[i] != sent[i]), common)
    got = read[first] if first < len(read) else "nothing"
    was = sent[first] if first < len(sent) else "nothing"
    raise ProtocolFault(
        "ids",
        f"the server read token {got} at position {first} where {was} was sent: it re-tokenized the prompt, so "
        "positions would be wrong; serve the model so that it accepts token ids",
    )


def read_next(answer, sent: list[int], wanted: list[int], vocab_size: int | None) -> tuple[int, dict[int, float]]:
    """(greedy next token, {token: log-prob} of ``wanted``) from a ``next_body`` answer."""
    picked = choice(answer)
    read = picked.get("prompt_token_ids")
    if read is None:
        raise NoTokenIds
    check_read(read, sent)
    tokens, values, tops = lists(picked.get("logprobs"), empty_is_missing=False)
    if not len(tokens) == len(values) == len(tops) == 1:
        raise Malformed(
            f"{len(tokens)} tokens, {len(values)} log-probs and {len(tops)} top lists for one generated token"
        )
    generated, scores = token_id(tokens[0], vocab_size), top(tops[0], vocab_size)
    if any(t not in scores for t in wanted):
        raise FastPathUnavailable
    consistent(generated, logprob(values[0]), scores)
    return generated, scores


def consistent(generated: int, own: float, scores: dict[int, float]) -> None:
    """Greedy decoding generates its most likely token: one of the asked tokens above it means the
    answer and its log-probs disagree."""
    above = [t for t, v in scores.items() if t != generated and v > max(own, scores.get(generated, own)) + 0.02]
    if above:
        raise ProtocolFault(
            "inconsistent",
            f"the server generated token {generated} (log-prob {own:.3g}) although token {above[0]} has log-prob "
            f"{scores[above[0]]:.3g}: greedy decoding and its own log-probs disagree",
        )


def read_echo(answer, sent: list[int], vocab_size: int | None) -> tuple[list[int], list, list]:
    """(echoed ids, prompt log-probs, top log-probs) of an echoed answer, after checking their shapes
    and that the server read exactly ``sent``."""
    echoed, values, tops = lists(choice(answer).get("logprobs"), empty_is_missing=True)
    if not len(echoed) == len(values) == len(tops) or len(echoed) < len(sent):
        counts = f"{len(echoed)} tokens, {len(values)} log-probs and {len(tops)} top lists"
        raise Malformed(f"{counts} for a prompt of {len(sent)} tokens")
    ids = [token_id(t, vocab_size) for t in echoed]
    check_read(ids[: len(sent)], sent)
    return ids, values, tops


def read_generated(answer, sent: list[int], max_tokens: int, check_ids: bool, vocab_size: int | None) -> list[int]:
    """The ids a ``generate_body`` answer generated (at most ``max_tokens``; fewer only when the
    server says it stopped, not when it says it ran out of length)."""
    picked = choice(answer)
    if check_ids and picked.get("prompt_token_ids") is not None:
        check_read(picked["prompt_token_ids"], sent)
    logprobs = picked.get("logprobs")
    tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None
    if not isinstance(tokens, list):
        raise NotCompatible(
            "the server returned no generated tokens; phasescope needs logprobs with return_tokens_as_token_ids (vLLM)"
        )
    if len(tokens) > max_tokens:
        raise Malformed(f"{len(tokens)} tokens generated where at most {max_tokens} were asked")
    if len(tokens) < max_tokens and picked.get("finish_reason") == "length":
        raise ProtocolFault(
            "short",
            f"the server generated {len(tokens)} of the {max_tokens} tokens asked and says it stopped for length "
            "(finish_reason 'length'): the answer was cut, not wrong",
        )
    return [token_id(token, vocab_size) for token in tokens]


__all__ = [
    "AnswerError",
    "FastPathUnavailable",
    "Malformed",
    "NoTokenIds",
    "NotCompatible",
    "ProtocolFault",
    "check_read",
    "echo_body",
    "generate_body",
    "logprob",
    "next_body",
    "read_echo",
    "read_generated",
    "read_next",
    "top",
]
