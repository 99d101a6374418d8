"""``prompts:FILE.jsonl``: any dataset made phase-aware.

Each line of the file is one content sample::

    {"prompt": "Q: What is the capital of France?\\nA:", "candidates": [" Paris", " Lyon"], "target": 0}
    {"prompt": "{pad}Translate to French: cat =>", "answer": " chat"}

* ``candidates`` (a list, or a dict name -> text) + ``target`` (an index, a candidate's text or
  name): multiple choice, scored by the teacher-forced log-prob of each candidate; correct when
  the target has the highest total log-prob (as lm-evaluation-harness's ``acc``).
* ``answer``: greedy exact match: correct when greedy decoding reproduces the answer's tokens
  (every argmax along the teacher-forced answer is the answer's token); its log-prob is kept.

The prompt is padded at its ``{pad}`` placeholder, or at its start (right after BOS) when it
has none, with a filler whose token count is measured, not assumed (``probes.padding``): for
each offset d, the first string of the filler's family (a run of the unit, spaced units,
lines of a run) that makes the prompt exactly ``base + d`` tokens long with the text on both
sides reading back as without padding, so the answer position -- the anchor -- takes every
phase (base = align mod step: one phase per offset for every prompt)::

    <bos> [filler: d + lead tokens] Q: What is the capital of France?\\nA: -> " Paris"
                                                                     ^ answer_pos = anchor

Fillers are tried in order (``FILLERS``, or ``--filler``) per prompt; each record carries the
padding used (text, characters, units, tokens).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from phasescope.probes.base import Probe, ProbeContext, ProbeError, ProbeItem
from phasescope.probes.options import ProbeOptions, chat_template_option, filler_option
from phasescope.probes.padding import AnswerPlacer, Placement
from phasescope.probes.padding_completion import answer_ids, decoder, encoder

SUMMARY = "prompts:FILE.jsonl -- your own prompts, padded so the answer takes every phase (needs a tokenizer)"
ARGUMENT = "FILE.jsonl"  # the probe is named prompts:FILE.jsonl
PLACEHOLDER = "{pad}"
FILLERS = ("\n", " ", ".", "-", "=", "*", "#", "~")  # tried in order, each with its family (probes.padding)


def read_prompts(path: str | Path) -> list[dict]:
    """The file's lines as {"prompt", "candidates": {name: text}, "target": name, "exact": bool}."""
    path = Path(path)
    if path.is_dir():
        raise ProbeError(f"prompts:{path} is a directory; pass --probe prompts:FILE.jsonl, a JSON-lines file")
    if not path.is_file():
        raise ProbeError(f"prompts file {path} does not exist; pass --probe prompts:FILE.jsonl with a JSON-lines file")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise ProbeError(f"{path} is not UTF-8 text; save it as UTF-8 JSON lines") from None
    rows = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            json.dumps(data, ensure_ascii=False).encode("utf-8")  # a lone surrogate (\\ud800) is not text
        except json.JSONDecodeError as err:
            raise ProbeError(f"{path} line {number} is not JSON ({err.msg}); one object per line") from None
        except UnicodeEncodeError:
            raise ProbeError(
                f"{path} line {number} holds an escape that is not a character (a lone surrogate such as \\ud800); "
                "write the text itself"
            ) from None
        rows.append(_row(data, f"{path} line {number}"))
    if not rows:
        raise ProbeError(f"{path} holds no prompts; one JSON object per line, see `phasescope sweep --help`")
    return rows


def _row(data, where: str) -> dict:
    if not isinstance(data, dict) or not isinstance(data.get("prompt"), str) or not data["prompt"]:
        raise ProbeError(f"{where}: expected an object with a non-empty text 'prompt'")
    prompt = data["prompt"]
    if prompt.count(PLACEHOLDER) > 1:
        raise ProbeError(f"{where}: the prompt holds {PLACEHOLDER} more than once; put it where padding goes, once")
    has_mc, has_answer = "candidates" in data, "answer" in data
    if has_mc == has_answer:
        raise ProbeError(f"{where}: give either 'candidates' + 'target' (multiple choice) or 'answer' (exact match)")
    unknown = set(data) - {"prompt", "candidates", "target", "answer", "id"}
    if unknown:
        raise ProbeError(f"{where}: unknown keys {sorted(unknown)}; allowed: prompt, candidates, target, answer, id")
    if has_answer:
        if not isinstance(data["answer"], str) or not data["answer"]:
            raise ProbeError(f"{where}: 'answer' must be non-empty text")
        return {"prompt": prompt, "candidates": {"answer": data["answer"]}, "target": "answer", "exact": True}
    candidates, target = _candidates(data["candidates"], data.get("target"), where)
    return {"prompt": prompt, "candidates": candidates, "target": target, "exact": False}


def _candidates(raw, target, where: str) -> tuple[dict, str]:
    if isinstance(raw, list):
        raw = {str(i): text for i, text in enumerate(raw)}
    if not isinstance(raw, dict) or len(raw) < 2:
        raise ProbeError(f"{where}: 'candidates' must be a list (or an object name -> text) of at least two texts")
    for name, text in raw.items():
        if not isinstance(text, str) or not text:
            raise ProbeError(f"{where}: candidate {name!r} must be non-empty text")
    if len(set(raw.values())) != len(raw):
        raise ProbeError(f"{where}: two candidates are the same text")
    if isinstance(target, int) and not isinstance(target, bool) and str(target) in raw:
        return raw, str(target)
    if isinstance(target, str) and target in raw:
        return raw, target
    by_text = {text: name for name, text in raw.items()}
    if isinstance(target, str) and target in by_text:
        return raw, by_text[target]
    raise ProbeError(f"{where}: 'target' {target!r} is not a candidate's index, name or text")


class PromptsProbe(Probe):
    name = "prompts"
    summary = "prompts:FILE.jsonl -- your own prompts, padded so the answer takes every phase (needs a tokenizer)"

    def __init__(
        self,
        path: str | Path,
        tokenizer,
        bos_id: int | None = None,
        filler: str | None = None,
        step: int = 1,
        align=0,
        max_len: int | None = None,
    ):
        self.path, self.rows = str(path), read_prompts(path)
        self.encode, self.decode, self.bos, self.filler = encoder(tokenizer), decoder(tokenizer), bos_id, filler
        self.step, self.align, self.max_len = step, align, max_len
        self.fillers: list[str] = []  # the unit each prompt was padded with, in file order

    def default_samples(self) -> int:
        return len(self.rows)

    def spec(self) -> dict:
        return {
            "probe": "prompts",
            "file": self.path,
            "prompts": len(self.rows),
            "fillers": sorted(set(self.fillers)),
            "lead_step": self.step,
        }

    def stream(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> Iterator[list[ProbeItem]]:
        """The first ``n_samples`` prompts of the file, in file order."""
        if n_samples > len(self.rows):  # repeating a prompt would count one score twice, as if independent
            raise ProbeError(
                f"{n_samples} content samples were asked but {self.path} holds {len(self.rows)} prompts; pass "
                f"--samples {len(self.rows)} or fewer (the default is all of them)"
            )
        placer = AnswerPlacer(self.encode, self.decode, self.step, self.align, self._head(), self.max_len)
        units = (self.filler,) if self.filler else FILLERS
        self.fillers = []
        for content_id, row in enumerate(self.rows[:n_samples]):
            where = f"prompt {content_id + 1} of {self.path}"
            placed = placer.place(*self._split(row["prompt"]), units, offsets, where)
            self.fillers.append(placed.unit)
            yield [self._item(row, content_id, d, placed) for d in offsets]

    def _head(self) -> tuple[int, ...]:
        return (self.bos,) if self.bos is not None else ()

    def _ids(self, text: str) -> list[int]:
        return list(self._head()) + self.encode(text)

    def _split(self, prompt: str) -> tuple[str, str]:
        return tuple(prompt.split(PLACEHOLDER)) if PLACEHOLDER in prompt else ("", prompt)

    def _item(self, row: dict, content_id: int, d: int, placed: Placement) -> ProbeItem:
        before, after = self._split(row["prompt"])
        padding = placed.paddings[d]
        text = before + padding.text + after
        prompt = self._ids(text)
        return ProbeItem(
            content_id=content_id,
            offset=d,
            input_ids=prompt,
            candidates=answer_ids(self._ids, text, row["candidates"], f"prompt {content_id + 1} of {self.path}"),
            target=row["target"],
            anchor_pos=len(prompt),
            answer_pos=len(prompt),
            rule="greedy" if row["exact"] else "choice",
            padding=padding.record(),
        )


def build(ctx: ProbeContext) -> PromptsProbe:
    step, align = ctx.geometry.step, ctx.geometry.align
    return PromptsProbe(
        ctx.spec.argument, ctx.need_tokenizer(), ctx.bos_id, ctx.spec.options.filler, step, align, max_len=ctx.max_len
    )


@dataclass(frozen=True)
class Options(ProbeOptions):
    """prompts:'s `phasescope sweep` options (probes/options.py)."""

    filler: str | None = filler_option()
    chat_template: bool = chat_template_option()
