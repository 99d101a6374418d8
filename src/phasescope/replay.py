"""``phasescope replay``: one reproducer (``phasescope.gate.reproducers``) sent again to any
endpoint, and whether its fault reproduces: the greedy answer to the exact prompt ids that
departed, compared with the expected tokens. The request body is the reproducer's ``request``
(also saved alone beside it, for ``curl -d @cell-00-....request.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from phasescope.errors import InputError


def replay(path: str | Path, model: str, times: int = 1, timeout: float = 120.0) -> dict:
    """{"reproduced": bool, "answers": [...], "lines": [...]}: the fault reproduced when any answer
    is not the expected tokens (or breaks the protocol)."""
    from phasescope.backends import vllm_protocol as vllm
    from phasescope.backends.transport import Transport

    entry = _read(Path(path))
    url, _, name = model.removeprefix("openai:").partition("#")
    if not model.startswith("openai:") or not url.startswith(("http://", "https://")) or not name:
        raise InputError(
            f"--model {model!r}: expected openai:http(s)://HOST[:PORT]/v1#MODEL, the endpoint to replay at"
        )
    body = dict(entry["request"]) | {"model": name}
    expected = list(entry["expected_ids"])
    transport = Transport(url, timeout=timeout, retries=2, backoff=1.0, model=name)
    where = f"content {entry['content_id']}, offset {entry['offset']}, prompt of {len(body['prompt'])} tokens"
    answers, lines = [], [f"{entry.get('what', 'a departure')}: {where}; expected {expected}"]
    for i in range(times):
        answer = transport.post("completions", body, f"replay {i + 1} of {times}")
        try:
            got = vllm.read_generated(answer, body["prompt"], body["max_tokens"], True, None)
            note = "the expected answer" if got == expected else "NOT the expected answer: the fault reproduced"
        except vllm.ProtocolFault as fault:
            got, note = None, f"an answer that broke the protocol ({fault.kind}: {fault.detail}): the fault reproduced"
        except vllm.AnswerError as err:
            raise InputError(f"{url}: {err.detail}") from None
        answers.append(got)
        lines.append(f"answer {i + 1}: {got} -- {note}")
    return {"reproduced": any(a != expected for a in answers), "answers": answers, "lines": lines}


def _read(path: Path) -> dict:
    if not path.is_file():
        raise InputError(f"{path} is not a file: pass a reproducer, OUT/compare/reproducers/cell-*.json of a check")
    try:
        entry = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise InputError(f"{path} is not a reproducer (unreadable JSON: {err})") from None
    if not isinstance(entry, dict) or "expected_ids" not in entry:
        raise InputError(f"{path} is not a reproducer: it has no expected_ids (reproducers/cell-*.json are)")
    if not entry.get("request"):
        raise InputError(
            f"{path} has no request to send: {entry.get('note') or 'the runs held no prompt ids'}; rerun the check, "
            "whose sweeps keep every prompt (--log-samples)"
        )
    return entry


__all__ = ["replay"]
