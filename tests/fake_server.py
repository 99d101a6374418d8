"""A local OpenAI-compatible /v1/completions server backed by a tiny transformers model: it
answers like vLLM (echoed prompt tokens as ``token_id:N``, prompt log-probs, top-1
alternatives) and can be told to misbehave, one fault per request, in order."""

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch


def _set_all(logprobs: dict, value) -> dict:
    """Every log-prob (prompt and top) replaced by ``value`` (an echoed prompt's first has none)."""
    values = [None if v is None else value for v in logprobs["token_logprobs"]]
    tops = [None if top is None else {k: value for k in top} for top in logprobs["top_logprobs"]]
    return logprobs | {"token_logprobs": values, "top_logprobs": tops}


# Answers a broken or non-vLLM server gives: each must be refused, naming the server, and record nothing.
MALFORMED = {
    "no-logprobs": lambda lp: None,
    "string-logprobs": lambda lp: "n/a",
    "short-logprobs": lambda lp: lp | {"token_logprobs": lp["token_logprobs"][:-3]},
    "short-tops": lambda lp: lp | {"top_logprobs": lp["top_logprobs"][:-1]},
    "tops-not-list": lambda lp: lp | {"top_logprobs": "x"},
    "top-string": lambda lp: lp | {"top_logprobs": lp["top_logprobs"][:-1] + ["?"]},
    "bad-token": lambda lp: lp | {"tokens": lp["tokens"][:-1] + ["token_id:abc"]},
    "huge-token": lambda lp: lp | {"tokens": lp["tokens"][:-1] + ["token_id:99999999999"]},
    "text-token": lambda lp: lp | {"tokens": ["hello"] + lp["tokens"][1:]},
    "minus-inf": lambda lp: _set_all(lp, -math.inf),
    "minus-1e308": lambda lp: _set_all(lp, -1e308),
    "positive": lambda lp: _set_all(lp, 1.92),
    "nan": lambda lp: _set_all(lp, math.nan),
    "string-value": lambda lp: _set_all(lp, "-0.5"),
}


# Well-formed answers that are not answers to what was sent: protocol findings (never scores).
PROTOCOL = ("not-top", "all-certain", "choices-reversed", "duplicate")


def _not_top(logprobs: dict) -> dict:
    """The generated token replaced by the least likely asked token: greedy decoding and its own
    log-probs disagree."""
    top = logprobs["top_logprobs"][-1]
    lowest = min(top, key=top.get)
    return logprobs | {
        "tokens": logprobs["tokens"][:-1] + [lowest],
        "token_logprobs": logprobs["token_logprobs"][:-1] + [top[lowest]],
    }


def _duplicated(text: str) -> str:
    """The answer's JSON with the first top log-prob key given twice (-0.01, then its own value)."""
    start = text.index('"top_logprobs": [') + len('"top_logprobs": [')
    start = text.index("{", start) + 1
    end = min(i for i in (text.find(",", start), text.find("}", start)) if i > 0)
    key = text[start:end].split(":")[0] + ":" + text[start:end].split(":")[1]
    return text[:start] + f"{key}: -0.01, " + text[start:]


class FakeVLLM:
    def __init__(self, model, name: str = "tiny"):
        self.model = model.eval()
        self.name = name  # the model name GET /v1/models lists (vLLM: the path or --served-model-name)
        # consumed one per request: "500", "drop", "garbage", "429", "307", "drip", or a malformed answer (MALFORMED)
        self.faults: list[str] = []
        self.token_ids_supported = True  # vLLM's logprob_token_ids; False: ignored, as by older servers
        self.prompt_ids_returned = True  # vLLM's return_token_ids (prompt_token_ids); False: ignored
        self.requests = 0
        self.echoed = 0  # requests asking for the prompt's log-probs (echo)
        self.auth: list[str | None] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # what vLLM says about itself: GET /version, GET /v1/models
                if self.path == "/version":
                    self._send(200, json.dumps({"version": "fake-vllm-1.0"}).encode())
                elif self.path == "/v1/models":
                    data = [{"id": server.name, "object": "model", "root": "tiny-root", "max_model_len": 512}]
                    self._send(200, json.dumps({"object": "list", "data": data}).encode())
                else:
                    self._send(404, b"not found")

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests += 1
                    server.echoed += bool(body.get("echo"))
                    server.auth.append(self.headers.get("Authorization"))
                    fault = server.faults.pop(0) if server.faults else None
                if fault == "drop":
                    self.connection.close()
                    return
                if fault == "500":
                    self._send(500, b"overloaded")
                    return
                if fault == "garbage":
                    self._send(200, b"{not json")
                    return
                if fault == "404":  # vLLM's answer to a path it does not serve (an address without /v1)
                    self._send(404, b'{"detail":"Not Found"}')
                    return
                if fault == "unknown-model":  # vLLM's answer to a model name it does not serve
                    message = f"The model `{body.get('model')}` does not exist."
                    self._send(404, json.dumps({"object": "error", "message": message, "code": 404}).encode())
                    return
                if fault == "307":  # a proxy moving the API: httpx does not follow it for a POST
                    self._send(307, b"", {"Location": "http://127.0.0.1:9/v2/completions"})
                    return
                if fault in ("429", "429-long"):
                    self._send(429, b"slow down", {"Retry-After": "150" if fault == "429-long" else "0.2"})
                    return
                if fault == "drip":  # one byte every 0.3 s for 30 s: never a whole answer in time
                    self.send_response(200)
                    self.send_header("Content-Length", "100")
                    self.end_headers()
                    for _ in range(100):
                        try:
                            self.wfile.write(b" ")
                            self.wfile.flush()
                        except OSError:  # the client gave up
                            return
                        time.sleep(0.3)
                    return
                text = json.dumps(server.answer(body, fault))
                self._send(200, (_duplicated(text) if fault == "duplicate" else text).encode())

            def _send(self, status, payload, headers=None):
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, body: dict, fault: str | None) -> dict:
        prompt = body["prompt"]  # token ids, or a batch of one list of them (lm-eval's local-completions)
        ids = list(prompt[0] if prompt and isinstance(prompt[0], list) else prompt)
        if not body.get("echo", False) and body["max_tokens"] > 1:
            return self.generate(ids, body["max_tokens"])
        if not body.get("echo", False):
            return self.next_token(ids, body, fault)
        with torch.no_grad():
            logp = torch.log_softmax(self.model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
        values = [None] + [float(logp[i - 1, t]) for i, t in enumerate(ids) if i > 0]
        tops = [None] + [
            {f"token_id:{int(logp[i - 1].argmax())}": float(logp[i - 1].max())} for i in range(1, len(ids))
        ]
        tokens = [f"token_id:{t}" for t in ids]
        generated = int(logp[-1].argmax())  # the one greedy token (max_tokens=1) after the prompt
        wanted = body.get("logprob_token_ids") if self.token_ids_supported else None
        top = {f"token_id:{t}": float(logp[-1, t]) for t in (wanted or [])}
        top[f"token_id:{generated}"] = float(logp[-1].max())
        tokens, values, tops = tokens + [f"token_id:{generated}"], values + [float(logp[-1].max())], tops + [top]
        if fault == "reorder":
            tokens[5] = f"token_id:{ids[5] + 1}"
        logprobs = {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops}
        if fault in MALFORMED:
            logprobs = MALFORMED[fault](logprobs)
        return {"choices": [{"index": 0, "text": "", "logprobs": logprobs}]}

    def next_token(self, ids: list[int], body: dict, fault: str | None) -> dict:
        """No echo (max_tokens 1): the generated token with the log-probs of logprob_token_ids, and
        with return_token_ids the ids read (``prompt_token_ids``), as vLLM answers."""
        with torch.no_grad():
            logp = torch.log_softmax(self.model(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
        generated = int(logp.argmax())
        wanted = body.get("logprob_token_ids") if self.token_ids_supported else None
        top = {f"token_id:{t}": float(logp[t]) for t in (wanted or [])} | {f"token_id:{generated}": float(logp.max())}
        logprobs = {"tokens": [f"token_id:{generated}"], "token_logprobs": [float(logp.max())], "top_logprobs": [top]}
        if fault in MALFORMED:
            logprobs = MALFORMED[fault](logprobs)
        if fault == "not-top":
            logprobs = _not_top(logprobs)
        if fault == "all-certain":
            logprobs = _set_all(logprobs, 0.0)
        choice = {"index": 0, "text": "", "logprobs": logprobs}
        if body.get("return_token_ids") and self.prompt_ids_returned:
            choice["prompt_token_ids"] = ids[:5] + [ids[5] + 1] + ids[6:] if fault == "reorder" else ids
        if fault == "choices-reversed":  # the real answer second, a junk one with index 1 first
            junk = {"index": 1, "text": "", "logprobs": _set_all(logprobs, -60.0)} | (
                {"prompt_token_ids": ids} if "prompt_token_ids" in choice else {}
            )
            return {"choices": [junk, choice]}
        return {"choices": [choice]}

    def generate(self, ids: list[int], max_tokens: int) -> dict:
        """Greedy generation (vLLM with temperature 0): the new tokens only, as ``token_id:N``."""
        new = []
        with torch.no_grad():
            for _ in range(max_tokens):
                new.append(int(self.model(input_ids=torch.tensor([ids + new])).logits[0, -1].argmax()))
        tokens = [f"token_id:{t}" for t in new]
        logprobs = {"tokens": tokens, "token_logprobs": [0.0] * len(new)}
        return {"choices": [{"index": 0, "text": "", "logprobs": logprobs}]}

    def close(self):
        self.httpd.shutdown()
