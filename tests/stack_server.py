"""A serving stack for diagnosing serving stacks: an OpenAI-compatible ``/v1/completions``
server (stdlib, 127.0.0.1, a port of its own, one thread) that answers phasescope's text
kv-retrieval prompts (probes/kv_retrieval_text.py) as a perfect model would, unless a fault
rule fires, so the behaviour of a stack bug keyed to the prompt's length, the needle's
position or their distance can be reproduced and measured without a GPU::

    server = StackServer(tokenizer, fault=("length", 4, 3))  # or encode=..., decode=...
    phasescope.sweep(f"openai:{server.url}#stack", ...)     # --tokenizer deepseek-v4
    server.requests, server.lengths, server.log             # what it was asked
    server.close()                                          # or: with StackServer(...) as server:

**The oracle.** From a request's prompt ids it finds the question (the ids between those of
``Question: what goes with`` and ``? Answer:``, its last occurrence): the key; L, the original
prompt's length, is the index right after ``? Answer:``'s last id, and the ids after it are the
answer so far. The key's line earlier in the prompt (the key's ids, the ``:`` id, optional
``--kv-gaps`` filler ids made of `` -``, `` ~``, `` =``, `` .``, then the value's ids up to the
newline id) gives the value and ``value_pos``, its first token's position. After the answer so
far ``value[:j]`` the right next token is ``value[j]`` (the newline id after the whole value);
after the prefix of another line's value (a distractor candidate's prefix), that value's next
token; after anything else, the newline id.

**The answer.** With ``logprob_token_ids`` the right token gets log-prob -0.01 and every other
asked id -12.0, and the right token is the one generated. When the fault rule fires, a wrong
token is generated instead (the same position of the nearest other line's value that differs,
else ``wrong_id``: by default the newline id, or the ``:`` id when the newline is right) and
gets -0.01, the right one -12.0.

**Fault rules** (``fault=``): ``None`` (healthy), or ``(kind, step, residue)``:

* ``("length", step, residue)``: fires when the request's prompt length % step == residue. A
  length-keyed stack bug (DeepSeek-V4 on vLLM answering wrong when the prompt length is 3 mod 4)
  lives in the prefill of the prompt: under teacher forcing (prompt + answer so far, lengths
  L, L+1, ...) it fires at whichever of those lengths hits the residue, but a greedy generation
  (``max_tokens`` > 1) evaluates it **only on the prompt's length L**, for its first token: the
  decode steps after it are healthy, as on the real stack.
* ``("needle", step, residue)``: fires when value_pos % step == residue (at every step).
* ``("distance", step, residue)``: fires when (L - value_pos) % step == residue (at every step).
* ``("seen", K, 0)``: request state -- fires when the request's first K ids (its opening) were
  seen before in a request for another prompt (a cross-request prefix-cache hit that reads stale
  state): the first item of each content is answered right, every later one wrong;
* ``("longer", N, 0)``: a length threshold -- fires when the request's prompt is N tokens or more
  (an indexer turning sparse past index_topk x compress rate);
* a callable ``fault(length, value_pos, L, decode_step) -> bool`` for anything else
  (``decode_step`` 0 for the token after the request's prompt, k for the k-th decode step).

``return_ids=False``: ``return_token_ids`` ignored (an older server), which moves the client to the
echo, which this stack refuses.

**Protocol faults** (``protocol=``): ``"short"`` a generation of more than one token stops after
one with ``finish_reason: "length"``; ``"ids"`` ``prompt_token_ids`` differ from the ids sent at
one position; ``"nan"`` the asked tokens' log-probs are NaN. Each fires on every request it can.

No echo only (as vLLM with ``return_token_ids``: the served backend's first path); an echoed
request or a prompt that is not a text kv-retrieval prompt is answered HTTP 400 naming why.
``max_tokens`` > 1 is greedy generation token by token (``finish_reason`` "length"; with
``stop_early`` True it stops after one token, as a stack emitting EOS). ``return_token_ids``
returns ``prompt_token_ids``; tokens are ``token_id:N``. GET ``/version`` and ``/v1/models``
describe it.

Attributes: ``url`` (``http://127.0.0.1:PORT/v1``), ``requests`` (POSTs answered or refused),
``lengths`` (each answered request's prompt length, in arrival order), ``log`` (one dict per
answered request: ``length``, ``L``, ``value_pos``, ``max_tokens``, ``generated`` ids and
``fired``, a list of bools, one per generated token), ``fault``, ``stop_early``.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RIGHT, OTHER = -0.01, -12.0
GAP_CHARACTERS = set("-~=.")  # what --kv-gaps fillers are made of (probes/kv_retrieval_text.GAP_FILLERS)
KINDS = ("length", "needle", "distance", "seen", "longer")
PROTOCOL_FAULTS = ("short", "ids", "nan")


class NotAPrompt(ValueError):
    """The prompt is not a text kv-retrieval prompt the oracle can read."""


def _find(ids: list[int], part: list[int], start: int = 0, stop: int | None = None) -> list[int]:
    """Every index i in [start, stop) where ``part`` starts in ``ids``."""
    stop = len(ids) - len(part) + 1 if stop is None else min(stop, len(ids) - len(part) + 1)
    first = part[0]
    return [i for i in range(start, stop) if ids[i] == first and ids[i : i + len(part)] == part]


class StackServer:
    """The oracle serving stack (see the module docstring)."""

    def __init__(
        self,
        tokenizer=None,
        *,
        encode=None,
        decode=None,
        fault=None,
        model: str = "stack",
        wrong_id: int | None = None,
        stop_early: bool = False,
        protocol: str | None = None,
        return_ids: bool = True,
        port: int = 0,
    ):
        if tokenizer is not None:
            encode = encode or (lambda text: list(tokenizer.encode(text, add_special_tokens=False)))
            decode = decode or tokenizer.decode
        if encode is None or decode is None:
            raise ValueError("StackServer needs a tokenizer, or encode and decode callables")
        if not (fault is None or callable(fault) or (len(fault) == 3 and fault[0] in KINDS and fault[1] >= 1)):
            raise ValueError(f"fault {fault!r}: expected None, a callable or (kind, step, residue), kind in {KINDS}")
        if protocol not in (None, *PROTOCOL_FAULTS):
            raise ValueError(f"protocol {protocol!r}: expected None or one of {PROTOCOL_FAULTS}")
        self.encode, self.decode, self.fault, self.model, self.stop_early = encode, decode, fault, model, stop_early
        self.protocol, self.return_ids = protocol, return_ids
        self.openings: dict[tuple, set] = {}  # ("seen" faults) an opening -> the prompts it was sent with
        self.ask = encode("Question: what goes with"), encode("? Answer:")
        self.sep, self.newline = self._one(":"), self._one("\n")
        self.wrong_id = wrong_id
        self.gap_ids: dict[int, bool] = {}  # id -> whether it is a --kv-gaps filler token
        self.requests = 0
        self.lengths: list[int] = []
        self.log: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                if self.path == "/version":
                    self._send(200, {"version": "stack-oracle"})
                elif self.path == "/v1/models":
                    entry = {"id": server.model, "object": "model", "root": "stack-oracle", "max_model_len": 1 << 20}
                    self._send(200, {"object": "list", "data": [entry]})
                else:
                    self._send(404, {"error": "not found"})

            def do_POST(self):
                with server.lock:
                    server.requests += 1
                if self.path.rstrip("/") != "/v1/completions":
                    self._send(404, {"error": f"{self.path}: only /v1/completions is served"})
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    self._send(200, server.answer(body))
                except NotAPrompt as err:
                    self._send(400, {"error": {"message": str(err), "type": "BadRequestError"}})

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def _one(self, text: str) -> int:
        ids = self.encode(text)
        if len(ids) != 1:
            raise ValueError(f"{text!r} is {len(ids)} tokens with this tokenizer; the oracle needs one")
        return ids[0]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)

    def __enter__(self) -> StackServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- reading the prompt ------------------------------------------------------------------------

    def _is_gap(self, token: int) -> bool:
        if token not in self.gap_ids:
            text = self.decode([token]).strip()
            self.gap_ids[token] = bool(text) and set(text) <= GAP_CHARACTERS
        return self.gap_ids[token]

    def read(self, ids: list[int]) -> dict:
        """The prompt as the oracle reads it: L, the answer so far, the key, the needle's value and
        value_pos, and every line's value (with its line's index) before the question."""
        ask, answer = self.ask
        starts = _find(ids, ask)
        if not starts:
            raise NotAPrompt("no 'Question: what goes with' in the prompt: not a text kv-retrieval prompt")
        q = starts[-1]
        ends = _find(ids, answer, q + len(ask))
        if not ends:
            raise NotAPrompt("no '? Answer:' after the question: not a text kv-retrieval prompt")
        key, big_l = ids[q + len(ask) : ends[0]], ends[0] + len(answer)
        lines = []  # (key position, value position, value ids) of every line before the question
        for s in (i for i in range(q) if ids[i] == self.sep):
            end = next((i for i in range(s + 1, q) if ids[i] == self.newline), None)
            if end is None:
                continue
            v = s + 1
            while v < end and self._is_gap(ids[v]):
                v += 1
            lines.append((s, v, ids[v:end]))
        needle = [n for n, (s, _, _) in enumerate(lines) if s >= len(key) and ids[s - len(key) : s] == key]
        if not key or not needle:
            raise NotAPrompt(f"the question's key {key} has no line '<key>: <value>' before the question")
        n = needle[-1]
        return {
            "L": big_l,
            "extra": ids[big_l:],
            "value": lines[n][2],
            "value_pos": lines[n][1],
            "needle": n,
            "lines": lines,
        }

    def right_next(self, read: dict, extra: list[int]) -> int:
        """The token a perfect model reads next after the prompt + ``extra``."""
        order = sorted(range(len(read["lines"])), key=lambda m: (abs(m - read["needle"]), m))
        for m in order:  # the needle's own line first, then the nearest others
            value = read["lines"][m][2]
            if value[: len(extra)] == extra:
                return value[len(extra)] if len(extra) < len(value) else self.newline
        return self.newline

    def wrong_next(self, read: dict, extra: list[int], right: int) -> int:
        """The token a faulty stack answers instead: the same position of the nearest other line's
        value that differs from ``right``, else ``wrong_id`` (default: newline, or ':' when it is right)."""
        j = len(extra)
        order = sorted(
            (m for m in range(len(read["lines"])) if m != read["needle"]), key=lambda m: abs(m - read["needle"])
        )
        for m in order:
            value = read["lines"][m][2]
            if j < len(value) and value[j] != right:
                return value[j]
        if self.wrong_id is not None and self.wrong_id != right:
            return self.wrong_id
        return self.newline if right != self.newline else self.sep

    def fires(self, length: int, value_pos: int, big_l: int, decode_step: int) -> bool:
        """Whether the fault rule fires for the token after ``length`` ids (``decode_step`` k > 0:
        the k-th decode step of a generation whose prompt had ``length - k`` ids)."""
        if self.fault is None:
            return False
        if callable(self.fault):
            return bool(self.fault(length, value_pos, big_l, decode_step))
        kind, step, residue = self.fault
        if kind == "seen":  # request state: answered by _stale
            return False
        if kind == "longer":  # a threshold on the request's prompt length
            return length - decode_step >= step
        if kind == "length":  # prefill only: the first token of a request
            return decode_step == 0 and length % step == residue % step
        if kind == "needle":
            return value_pos % step == residue % step
        return (big_l - value_pos) % step == residue % step

    def _stale(self, ids: list[int], big_l: int) -> bool:
        """A ("seen", K, 0) fault: this request's opening was sent before with another prompt."""
        if self.fault is None or callable(self.fault) or self.fault[0] != "seen":
            return False
        opening, prompt = tuple(ids[: self.fault[1]]), tuple(ids[:big_l])
        with self.lock:
            before = self.openings.setdefault(opening, set())
            stale = bool(before - {prompt})
            before.add(prompt)
        return stale

    # -- answering ---------------------------------------------------------------------------------

    def answer(self, body: dict) -> dict:
        if body.get("echo"):
            raise NotAPrompt("stack_server answers without echo only (as vLLM with return_token_ids)")
        prompt = body["prompt"]
        ids = list(prompt[0] if prompt and isinstance(prompt[0], list) else prompt)
        read = self.read(ids)
        wanted = list(body.get("logprob_token_ids") or [])
        max_tokens = int(body.get("max_tokens") or 1)
        generated, values, tops, fired = [], [], [], []
        stale = self._stale(ids, read["L"])
        for k in range(max_tokens):
            extra = read["extra"] + generated
            right = self.right_next(read, extra)
            fire = stale or self.fires(len(ids) + k, read["value_pos"], read["L"], k)
            token = self.wrong_next(read, extra, right) if fire else right
            top = {f"token_id:{t}": OTHER for t in wanted} | {f"token_id:{right}": OTHER if fire else RIGHT}
            top[f"token_id:{token}"] = RIGHT
            generated.append(token)
            values.append(RIGHT)
            tops.append(top)
            fired.append(fire)
            if self.stop_early or (self.protocol == "short" and max_tokens > 1):
                break
        with self.lock:
            self.lengths.append(len(ids))
            self.log.append(
                {
                    "length": len(ids),
                    "L": read["L"],
                    "value_pos": read["value_pos"],
                    "max_tokens": max_tokens,
                    "generated": generated,
                    "fired": fired,
                }
            )
        if self.protocol == "nan" and wanted:
            tops = [{key: float("nan") for key in top} for top in tops]
        logprobs = {"tokens": [f"token_id:{t}" for t in generated], "token_logprobs": values, "top_logprobs": tops}
        cut = self.protocol == "short" and max_tokens > 1
        choice = {
            "index": 0,
            "text": self.decode(generated),
            "logprobs": logprobs,
            "finish_reason": "stop" if len(generated) < max_tokens and not cut else "length",
        }
        if body.get("return_token_ids") and self.return_ids:
            choice["prompt_token_ids"] = ids if self.protocol != "ids" else ids[:3] + [ids[3] + 1] + ids[4:]
        return {"object": "text_completion", "model": self.model, "choices": [choice]}


def main() -> None:
    """Serve from the command line (docs/serving.md, 'Diagnose a serving stack'), until Ctrl-C:
    ``python tests/stack_server.py --port 8001 --fault length:4:3`` (no --fault: healthy)."""
    import argparse
    import time

    from phasescope.backends.tokenizers import named_tokenizer

    parser = argparse.ArgumentParser(description="an oracle serving stack for phasescope's text kv-retrieval")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--tokenizer", default="deepseek-v4", help="deepseek-v4 or qwen3")
    parser.add_argument(
        "--fault", default=None, help="KIND:STEP:RESIDUE, KIND one of length, needle, distance, seen, longer"
    )
    parser.add_argument("--protocol", default=None, help="a protocol fault: short, ids or nan")
    args = parser.parse_args()
    fault = None
    if args.fault:
        kind, step, residue = args.fault.split(":")
        fault = (kind, int(step), int(residue))
    server = StackServer(named_tokenizer(args.tokenizer), fault=fault, protocol=args.protocol, port=args.port)
    print(f"serving {server.url} (fault: {fault})", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.close()


if __name__ == "__main__":
    main()
