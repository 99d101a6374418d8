"""``padding-completion``: code prompts whose answer position is moved by padding.

A pad unit is repeated n times at a chosen place (default: inside a leading docstring, as
the study's ``=`` padding); n = offset sweeps the phase of the answer position, which is
the anchor. The study's prompt is a short FP8 quantisation helper whose last line casts to
``torch.float8_e4m3fn``; the right next token is ``8``, the wrong one ``32`` (primed by
``torch.float32`` earlier in the code).

Content samples: by default content i is one function of the built-in set
(``code_prompts.PROMPTS``: the FP8 helper and other short functions whose answer has a
plausible wrong twin, candidates named ``right`` and ``wrong``) with one docstring phrasing;
``--samples N`` draws N distinct (function, phrasing) pairs, deterministic given the seed,
and refuses more than there are. Own prompts: ``--probe-file`` with one prompt (one content)
or a list of prompts (content i = the i-th prompt). Each content is scored at every offset
with n = offset + lead pad copies, the lead (0..step-1, ``phase_lead``) bringing its answer to
phase 0 at offset 0, so at offset d every content's answer sits at phase d mod step however
long its prompt is (one phase per offset: the period test applies).

Token exactness is checked per content, not assumed: every repeat must add exactly one token
and leave the tokens around the pad unchanged; BPE often merges runs of ``=``, so the probe
tries the unit, then the unit with a leading and a trailing space, and raises ``ProbeError``
naming the content when none works; an answer that merges with the prompt's last token is
refused the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from phasescope.errors import InputError
from phasescope.probes import code_prompts
from phasescope.probes.base import Probe, ProbeError, ProbeItem
from phasescope.runfiles import read_json_value
from phasescope.validation import build

DEFAULT_SAMPLES = 50  # contents when the caller does not say (as kv-retrieval)

FP8_PROMPT = '''import torch


def quantize_fp8(x: torch.Tensor) -> torch.Tensor:
    """Scale a tensor into the FP8 range and cast it.
{pad}
    """
    amax = x.abs().max().to(torch.float32)
    scale = 448.0 / amax.clamp(min=1e-12)
    y = (x * scale).clamp(-448.0, 448.0)
    return y.to(torch.float'''


@dataclass(frozen=True)
class CompletionSpec:
    prompt: str = FP8_PROMPT  # must contain "{pad}" once
    candidates: dict = field(default_factory=lambda: {"right": "8", "wrong": "32"})
    target: str = "right"
    pad_unit: str = "="
    name: str = ""  # names the content in errors and spec.json

    @classmethod
    def from_file(cls, path: str | Path) -> CompletionSpec:
        """JSON object with keys prompt, candidates, target, pad_unit, name."""
        specs = cls.list_from_file(path)
        if len(specs) != 1:
            raise ProbeError(f"{path}: expected one prompt (a JSON object), found a list of {len(specs)}")
        return specs[0]

    @classmethod
    def list_from_file(cls, path: str | Path) -> list[CompletionSpec]:
        """One prompt (a JSON object) or several (a non-empty JSON list of objects): one content each."""
        data = read_json_value(
            Path(path), "probe file", 'expected {"prompt": "...{pad}...", "candidates": {...}, ...} or a list of them'
        )
        items = data if isinstance(data, list) else [data]
        if not items:
            raise ProbeError(f"{path}: the list of prompts is empty")
        try:
            return [
                build(cls, item, f"{path}" + (f" prompt {i}" if isinstance(data, list) else ""))
                for i, item in enumerate(items)
            ]
        except InputError as err:
            raise ProbeError(str(err)) from None

    def __post_init__(self) -> None:
        if not isinstance(self.prompt, str) or self.prompt.count("{pad}") != 1:
            raise ProbeError("the prompt must be text containing the placeholder {pad} exactly once")
        if not isinstance(self.candidates, dict) or not self.candidates:
            raise ProbeError(f"candidates must map names to answer texts, got {self.candidates!r}")
        for name, answer in self.candidates.items():
            if not isinstance(answer, str) or not answer:
                raise ProbeError(f"candidate {name!r} must be a non-empty answer text, got {answer!r}")
        if not isinstance(self.pad_unit, str) or not self.pad_unit:
            raise ProbeError(f"pad_unit must be non-empty text, got {self.pad_unit!r}")
        if not isinstance(self.target, str) or self.target not in self.candidates:
            raise ProbeError(f"target {self.target!r} is not one of the candidates {sorted(self.candidates)}")
        if not isinstance(self.name, str):
            raise ProbeError(f"name must be text, got {self.name!r}")


def builtin_contents(n: int, rng: np.random.Generator) -> list[CompletionSpec]:
    """n distinct contents of the built-in code prompts (``code_prompts.combinations``)."""
    out = []
    for p, q in code_prompts.combinations(n, rng):
        prompt = code_prompts.PROMPTS[p]
        text = code_prompts.render(prompt, code_prompts.DOC_PHRASINGS[q])
        out.append(CompletionSpec(text, {"right": prompt.right, "wrong": prompt.wrong}, name=f"{prompt.name}/doc{q}"))
    return out


def encoder(tokenizer):
    """A function text -> ids for a transformers tokenizer or a tokenizers.Tokenizer."""
    if hasattr(tokenizer, "encode_batch") and not hasattr(tokenizer, "convert_tokens_to_ids"):
        return lambda text: tokenizer.encode(text, add_special_tokens=False).ids
    return lambda text: list(tokenizer.encode(text, add_special_tokens=False))


def pads_cleanly(ids, before: str, after: str, unit: str, n: int) -> bool:
    """True when ``before + unit * n + after`` is the ids of ``before + after`` with n copies of
    one token inserted (``ids``: text -> token ids): the padding neither merges nor moves a neighbour."""
    bare, padded = ids(before + after), ids(before + unit * n + after)
    if len(padded) != len(bare) + n:
        return False
    for split in range(len(bare) + 1):
        if padded[:split] == bare[:split] and padded[split + n :] == bare[split:]:
            return len(set(padded[split : split + n])) <= 1
    return False


def unit_variants(unit: str) -> tuple[str, str, str]:
    """A pad unit as given, with a leading space and with a trailing space: the three forms a
    probe tries, since BPE often merges a bare unit with its copies or its neighbours."""
    return unit, " " + unit, unit + " "


def answer_ids(ids, text: str, candidates: dict[str, str], where: str) -> dict[str, list[int]]:
    """Each candidate's token ids after the prompt ``text`` (``ids``: text -> token ids); refuses a
    candidate that merges with the prompt's last token, since its first token would then not be
    predicted at the answer position."""
    prompt = ids(text)
    out = {}
    for name, answer in candidates.items():
        full = ids(text + answer)
        if full[: len(prompt)] != prompt:
            raise ProbeError(
                f"{where}: candidate {name!r} ({answer!r}) merges with the end of the prompt when tokenized; "
                "end the prompt at a token boundary (e.g. put the space in the answer)"
            )
        out[name] = full[len(prompt) :]
    return out


def phase_lead(prompt_len: int, step: int, align: int) -> int:
    """Extra pad copies (0..step-1) that put a prompt's answer at phase 0 at offset 0, so that at
    offset d every content's answer sits at phase d mod step, whatever the prompt's length."""
    return (align - prompt_len) % step


class PaddingCompletionProbe(Probe):
    name = "padding-completion"
    summary = "code prompts; a pad unit repeated n times moves the answer position (needs a tokenizer)"

    def __init__(
        self,
        tokenizer,
        spec: CompletionSpec | list[CompletionSpec] | None = None,
        bos_id: int | None = None,
        step: int = 1,
        align: int = 0,
    ):
        """``spec``: one prompt, a list (one content each), or None for the built-in set. ``step``,
        ``align``: each content gets n = offset + lead pad copies (``phase_lead``), so offsets map to
        one phase across contents of different lengths (step 1: n = offset, the study's shape)."""
        self.encode, self.bos, self.step, self.align = encoder(tokenizer), bos_id, step, align
        self.given = [spec] if isinstance(spec, CompletionSpec) else (None if spec is None else list(spec))
        self.contents: list[CompletionSpec] = []  # what items() used, content_id = index
        self.units: list[str] = []  # the pad unit used for each content

    def default_samples(self) -> int:
        return DEFAULT_SAMPLES if self.given is None else len(self.given)

    def spec(self) -> dict:
        return {
            "probe": self.name,
            "source": "built-in code prompts" if self.given is None else "given prompts",
            "contents": [
                {
                    "name": c.name,
                    "prompt": c.prompt,
                    "candidates": c.candidates,
                    "target": c.target,
                    "pad_unit_asked": c.pad_unit,
                    "pad_unit_used": unit,
                }
                for c, unit in zip(self.contents, self.units, strict=True)
            ],
        }

    def _ids(self, text: str) -> list[int]:
        return ([self.bos] if self.bos is not None else []) + self.encode(text)

    def _contents(self, n: int, rng: np.random.Generator) -> list[CompletionSpec]:
        if self.given is None:
            return builtin_contents(n, rng)
        if n > len(self.given):
            # repeating a prompt would count one deterministic score twice, as if it were independent
            raise ProbeError(
                f"{n} content samples were asked but {len(self.given)} prompt(s) were given (each prompt is one "
                f"content): pass --samples {len(self.given)} or fewer, or give more prompts (a JSON list)"
            )
        return self.given[:n]

    @staticmethod
    def _label(content: int, spec: CompletionSpec) -> str:
        return f"content {content}" + (f" ({spec.name})" if spec.name else "")

    def _choose_unit(self, spec: CompletionSpec, offsets: list[int], label: str) -> str:
        """The first of unit, " unit", "unit " whose n repeats add exactly n tokens, all the same,
        and leave the tokens before and after the padding unchanged."""
        tried = []
        for unit in unit_variants(spec.pad_unit):
            if all(self._pads_cleanly(spec, unit, n) for n in offsets):
                return unit
            tried.append(repr(unit))
        raise ProbeError(
            f"{label}: no pad unit adds exactly one token per repeat without changing its neighbours with this "
            f"tokenizer (tried {', '.join(tried)}); BPE merges runs of such units or joins them to the text around "
            "{pad}: pass another pad_unit"
        )

    def _pads_cleanly(self, spec: CompletionSpec, unit: str, n: int) -> bool:
        return pads_cleanly(self._ids, *spec.prompt.split("{pad}"), unit, n)

    def _item(self, content: int, spec: CompletionSpec, unit: str, n: int, d: int, label: str) -> ProbeItem:
        """Content ``content`` at offset d, padded with n = d + its lead copies of ``unit``."""
        text = spec.prompt.replace("{pad}", unit * n)
        prompt = self._ids(text)
        return ProbeItem(
            content_id=content,
            offset=d,
            input_ids=prompt,
            candidates=answer_ids(self._ids, text, spec.candidates, label),
            target=spec.target,
            anchor_pos=len(prompt),
            answer_pos=len(prompt),
        )

    def items(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> list[ProbeItem]:
        contents = self._contents(n_samples, rng)
        padded = [d + lead for d in offsets for lead in range(self.step)]  # every n a lead can ask for
        units = [self._choose_unit(spec, padded, self._label(c, spec)) for c, spec in enumerate(contents)]
        self.contents, self.units = contents, units  # set together: spec() pairs them
        items = []
        for c, spec in enumerate(contents):
            lead = phase_lead(len(self._ids(spec.prompt.replace("{pad}", ""))), self.step, self.align)
            items += [self._item(c, spec, units[c], lead + d, d, self._label(c, spec)) for d in offsets]
        return items
