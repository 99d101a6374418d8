"""A local OpenAI-compatible /v1/completions server backed by a tiny transformers model: it
answers like vLLM (echoed prompt tokens as ``token_id:N``, prompt log-probs, top-1
alternatives) and can be told to misbehave, one fault per request, in order."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import torch


class FakeVLLM:
    def __init__(self, model):
        self.model = model.eval()
        self.faults: list[str] = []  # consumed one per request: "500", "drop", "garbage", "no-logprobs", "reorder"
        self.token_ids_supported = True  # vLLM's logprob_token_ids; False: ignored, as by older servers
        self.requests = 0
        self.auth: list[str | None] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.requests += 1
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
                self._send(200, json.dumps(server.answer(body, fault)).encode())

            def _send(self, status, payload):
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, body: dict, fault: str | None) -> dict:
        ids = list(body["prompt"])
        if not body.get("echo", False):
            return self.generate(ids, body["max_tokens"])
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
        logprobs = (
            None if fault == "no-logprobs" else {"tokens": tokens, "token_logprobs": values, "top_logprobs": tops}
        )
        return {"choices": [{"index": 0, "text": "", "logprobs": logprobs}]}

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
