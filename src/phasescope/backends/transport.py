"""Sending requests to a model server: one exchange within a deadline, retries with backoff,
``Retry-After`` honoured, redirects named instead of followed, the API key from the environment
(never logged or written). What the answer means is the protocol adapter's business
(``backends/vllm_protocol.py``); the served backend joins the two (``backends/served.py``).

A failure the server may recover from (5xx, a dropped connection, the deadline, unreadable JSON,
HTTP 429) is retried ``retries`` times; the last one, or a 4xx, is an ``InputError`` naming the
server and where in the sweep it happened (``where``: "content 3, offset 7").
"""

from __future__ import annotations

import email.utils
import json
import os
import sys
import time

from phasescope.errors import InputError

MAX_RETRY_AFTER = 300.0  # seconds: a longer rate-limit wait ends the sweep (a rerun resumes)
KEPT = "Scored records are kept; rerun the same command to resume"


class Transport:
    """POSTs JSON to ``url`` + a path and returns the decoded answer (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        timeout: float,
        retries: int,
        backoff: float,
        api_key_env: str = "OPENAI_API_KEY",
        model: str = "",
        say=None,
    ):
        import httpx

        self.url, self.timeout, self.retries, self.backoff, self.model = (
            url.rstrip("/"),
            timeout,
            retries,
            backoff,
            model,
        )
        key = os.environ.get(api_key_env, "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = httpx.Client(headers=headers, timeout=timeout)
        self.say = say or _to_stderr  # a long wait is said, so a quiet run (--no-progress) is not taken for a hang
        self.answered = False  # the server has answered once: a refused connection after that is worth retrying

    def get(self, url: str) -> dict:
        """GET ``url``'s JSON object, {} when the server does not answer with one (never an error:
        a server that does not describe itself is still scored)."""
        try:
            answer = self.client.get(url, timeout=min(self.timeout, 10.0))
            data = answer.json() if answer.status_code == 200 else {}
        except Exception:  # noqa: BLE001
            return {}
        return data if isinstance(data, dict) else {}

    def preflight(self) -> None:
        """One short ``GET /models`` before any prompt is built, so a wrong address, a server that is
        not running or a model name it does not serve is said within seconds with its fix (#59 item
        9), not after the tokenizer, the probe and the first batch. A server that answers it
        otherwise (no such route, an error, a timeout) is left to the scoring requests."""
        import httpx

        try:
            answer = self.client.get(f"{self.url}/models", timeout=min(self.timeout, PREFLIGHT_TIMEOUT))
        except httpx.ConnectError as err:
            raise InputError(_nothing_answers(self.url, f"ConnectError: {err}")) from None
        except httpx.HTTPError:
            return
        self.answered = True
        if answer.status_code in (401, 403):
            raise InputError(
                f"{self.url}: the server refused the request (HTTP {answer.status_code}): it wants an API key; put "
                "it in the environment variable --api-key-env names (default OPENAI_API_KEY) and rerun"
            )
        if answer.status_code == 404 and not self.url.endswith("/v1"):
            raise InputError(f"{self.url}: no API there (HTTP 404 on GET /models).{self._hint(404)}")
        try:
            data = answer.json().get("data") if answer.status_code == 200 else None
        except (ValueError, AttributeError):
            return
        served = model_ids(data)
        if served and self.model and self.model not in served:
            raise InputError(
                f"{self.url}: the server does not serve {self.model!r}; it serves {', '.join(served)}: try --model "
                f"openai:{self.url}#{served[0]}"
            )

    def post(self, path: str, body: dict, where: str) -> object:
        """The decoded JSON answer to ``body`` POSTed to ``url/path`` (``where``: the sweep's place,
        for messages)."""
        last = ""
        wait = 0.0
        for attempt in range(self.retries + 1):
            if attempt:
                pause = max(wait, min(self.backoff * 2 ** (attempt - 1), 30.0))
                if pause >= 10:
                    self.say(f"{self.url}: {last}; waiting {pause:.0f} s before trying again ({where})")
                time.sleep(pause)
            status, text, retry_after, location = self._send(path, body)
            wait = 0.0
            if status is None and text.startswith("ConnectError") and not self.answered:
                raise InputError(_nothing_answers(self.url, f"{text}; {where}"))
            self.answered = self.answered or status is not None
            if status is None or status >= 500:
                last = text if status is None else f"HTTP {status}: {text[:200]}"
                continue
            if status == 429:
                wait = retry_after if retry_after is not None else 0.0
                if wait > MAX_RETRY_AFTER:
                    raise InputError(
                        f"{self.url}: the server is rate-limiting (HTTP 429) and asks to wait {wait:.0f} s, longer "
                        f"than phasescope waits ({MAX_RETRY_AFTER:.0f} s; {where}). {KEPT} once the limit has passed"
                    )
                last = "HTTP 429 (rate limited)" + (f", Retry-After {wait:g} s" if retry_after is not None else "")
                continue
            if 300 <= status < 400:
                raise InputError(self._redirected(status, location, where))
            if status >= 400:
                raise InputError(
                    f"{self.url}: the server refused the request (HTTP {status}; {where}): {text[:300]}."
                    f"{self._hint(status)} {KEPT} once it is fixed"
                )
            try:
                return json.loads(text, object_pairs_hook=_no_duplicates)
            except DuplicateKey as dup:
                return {"__duplicate_key__": str(dup)}
            except ValueError:
                last = f"unreadable JSON: {text[:100]!r}"
        raise InputError(f"{self.url}: no answer after {self.retries + 1} tries ({where}; last: {last}). {KEPT}")

    def _hint(self, status: int) -> str:
        """What a 404 most often means: the address lacks the API's /v1 (OpenAI-compatible servers,
        vLLM's among them, answer under it), or, under /v1, a model name the server does not serve
        (its GET /v1/models names the ones it does)."""
        if status != 404:
            return ""
        if self.url.endswith("/v1"):
            served = model_ids(self.get(f"{self.url}/models").get("data"))
            if not served or self.model in served:
                return ""
            return f" The server serves {', '.join(served)}: try --model openai:{self.url}#{served[0]}"
        return (
            f" OpenAI-compatible servers answer under /v1: try --model openai:{self.url}/v1#{self.model}"
            if self.model
            else f" OpenAI-compatible servers answer under /v1: try {self.url}/v1"
        )

    def _redirected(self, status: int, location: str | None, where: str) -> str:
        """A redirect is not followed (a POST's body is not resent to a place the user did not name):
        say where the server points, as the URL to pass instead."""
        to = f" to {location}" if location else ""
        base = location.removesuffix("/completions") if location else None
        fix = f"pass the address it points to, openai:{base}#{self.model}" if base else "pass the server's own address"
        return (
            f"{self.url}: the server answered HTTP {status}, a redirect{to} ({where}); phasescope does not follow "
            f"redirects: {fix}. {KEPT}"
        )

    def _send(self, path: str, body: dict) -> tuple[int | None, str, float | None, str | None]:
        """(HTTP status or None for no answer, body text or the failure, Retry-After seconds, a
        redirect's Location), the whole exchange within ``timeout`` seconds: a server that drips
        bytes is cut off."""
        import httpx

        deadline = time.monotonic() + self.timeout
        late = f"no complete answer within --timeout {self.timeout:g} s"
        try:
            with self.client.stream("POST", f"{self.url}/{path}", json=body) as response:
                chunks = []
                for chunk in response.iter_bytes():
                    chunks.append(chunk)
                    if time.monotonic() > deadline:
                        return None, late, None, None
                text = b"".join(chunks).decode("utf-8", errors="replace")
                headers = response.headers
                return response.status_code, text, retry_after(headers.get("retry-after")), headers.get("location")
        except httpx.TimeoutException:
            return None, late, None, None
        except httpx.TransportError as err:
            return None, f"{type(err).__name__}: {err}", None, None


def model_ids(data) -> list[str]:
    """The model names in a ``GET /v1/models`` answer's ``data`` (anything else: none)."""
    models = data if isinstance(data, list) else []
    return [m["id"] for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]


def _nothing_answers(url: str, detail: str) -> str:
    """A refused connection before the server has answered once: nothing listens there."""
    return (
        f"{url}: nothing answers there ({detail}): is the server running, and are its host and port the ones in "
        "--model? Start it (e.g. `vllm serve MODEL --port 8000`) and rerun"
    )


PREFLIGHT_TIMEOUT = 5.0  # seconds for the pre-flight GET /models: a live server answers in milliseconds


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are unique: a server that sends one token's log-prob twice (-0.01,
    then -12) would otherwise be read as whichever came last."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(f"the key {key!r} appears twice in one object")
        out[key] = value
    return out


def retry_after(header: str | None) -> float | None:
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


__all__ = ["KEPT", "MAX_RETRY_AFTER", "Transport", "retry_after"]
