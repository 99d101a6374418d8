"""``padding-completion``: code prompts whose answer position is moved by padding.

Padding of a unit (default ``=``, inside a leading docstring, as in the study) moves the
answer position, which is the anchor. The study's prompt is a short FP8 quantisation helper
whose last line casts to ``torch.float8_e4m3fn``; the right next token is ``8``, the wrong one
``32`` (primed by ``torch.float32`` earlier in the code).

Content samples: by default content i is one function of the built-in set
(``code_prompts.PROMPTS``: the FP8 helper and other short functions whose answer has a
plausible wrong twin, candidates named ``right`` and ``wrong``) with one docstring phrasing;
``--samples N`` draws N distinct (function, phrasing) pairs, deterministic given the seed,
and refuses more than there are. Own prompts: ``--probe-file`` with one prompt (one content)
or a list of prompts (content i = the i-th prompt).

The phase is the answer's **token** position, measured: a real BPE does not add one token per
``=`` (DeepSeek-V4 merges runs into ``==``, ``====``, ... and glues the last one to the newline),
so for each offset d the probe searches the unit's padding family (``probes.padding``: one run
of n units first -- the study's n -- then spaced units, then several lines of a run) for the
first string that makes the prompt exactly ``base + d`` tokens long with the code around it
reading back as without padding; ``base`` = align (mod step), so at offset d every content's
answer sits at phase d mod step however long its prompt is (one phase per offset: the period
test applies). Each record carries the padding used (text, characters, units = the number of
``=`` signs, tokens). Offsets no padding reaches are refused, naming them; an answer that
merges with the prompt's last token is refused the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import phasescope.probes.code_prompts as code_prompts
from phasescope.errors import InputError
from phasescope.probes.base import Probe, ProbeContext, ProbeError, ProbeItem
from phasescope.probes.options import ProbeOptions, chat_template_option, option
from phasescope.probes.padding import AnswerPlacer, Placement
from phasescope.rundir.files import read_json_value
from phasescope.validation import build as build_config

SUMMARY = "code prompts (the study's FP8 helper among them); '=' padding moves the answer (needs a tokenizer)"


@dataclass(frozen=True)
class Options(ProbeOptions):
    """padding-completion's `phasescope sweep` options (probes/options.py)."""

    probe_file: str | None = option(
        None,
        "padding-completion: your prompts, a JSON object with prompt (containing {pad}), candidates, target, "
        "pad_unit and name, or a list of them (one content each).",
        metavar="FILE",
    )
    single_run: bool = option(
        False,
        "padding-completion: pad with one run of the pad unit only (the study's literal '=' padding), no lines or "
        "spaced units; offsets that no run length reaches are refused, with the reason.",
    )
    chat_template: bool = chat_template_option()


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
                build_config(cls, item, f"{path}" + (f" prompt {i}" if isinstance(data, list) else ""))
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


def _raw(tokenizer) -> bool:
    """A tokenizers.Tokenizer (not a transformers tokenizer)."""
    return hasattr(tokenizer, "encode_batch") and not hasattr(tokenizer, "convert_tokens_to_ids")


def encoder(tokenizer):
    """A function text -> ids for a transformers tokenizer or a tokenizers.Tokenizer."""
    if _raw(tokenizer):
        return lambda text: tokenizer.encode(text, add_special_tokens=False).ids
    return lambda text: list(tokenizer.encode(text, add_special_tokens=False))


def decoder(tokenizer):
    """A function ids -> text that keeps special tokens (a BOS decodes to its own text; a
    tokenizers.Tokenizer would drop them by default, a transformers tokenizer keeps them); None
    for an encode-only tokenizer."""
    if _raw(tokenizer):
        return lambda ids: tokenizer.decode(list(ids), skip_special_tokens=False)
    if not hasattr(tokenizer, "decode"):
        return None
    return lambda ids: tokenizer.decode(list(ids))


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
    summary = "code prompts; padding of a unit (the study's '=') moves the answer position (needs a tokenizer)"

    def __init__(
        self,
        tokenizer,
        spec: CompletionSpec | list[CompletionSpec] | None = None,
        bos_id: int | None = None,
        step: int = 1,
        align: int = 0,
        max_len: int | None = None,
        single_run: bool = False,
    ):
        """``spec``: one prompt, a list (one content each), or None for the built-in set. ``step``,
        ``align``: each content's answer sits at base + d at offset d with base = align (mod step),
        so offsets map to one phase across contents of different lengths."""
        self.encode, self.decode, self.bos = encoder(tokenizer), decoder(tokenizer), bos_id
        self.step, self.align, self.max_len = step, align, max_len
        self.single_run = single_run  # --single-run: one run of the pad unit only
        self.given = [spec] if isinstance(spec, CompletionSpec) else (None if spec is None else list(spec))
        self.contents: list[CompletionSpec] = []  # what items() used, content_id = index
        self.placements: list[Placement] = []  # how each content was padded

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
                    "pad_unit": c.pad_unit,
                    "answer_pos_at_offset_0": placed.base,
                }
                for c, placed in zip(self.contents, self.placements, strict=True)
            ],
        }

    def _head(self) -> tuple[int, ...]:
        return (self.bos,) if self.bos is not None else ()

    def _ids(self, text: str) -> list[int]:
        return list(self._head()) + self.encode(text)

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

    def _item(self, content: int, spec: CompletionSpec, placed: Placement, d: int) -> ProbeItem:
        """Content ``content`` at offset d: its answer at ``placed.base + d``, measured."""
        padding = placed.paddings[d]
        text = spec.prompt.replace("{pad}", padding.text)
        prompt = self._ids(text)
        if len(prompt) != placed.base + d:  # a padding measured in place encodes to that length
            raise ProbeError(f"internal: {self._label(content, spec)} offset {d} is {len(prompt)} tokens long")
        return ProbeItem(
            content_id=content,
            offset=d,
            input_ids=prompt,
            candidates=answer_ids(self._ids, text, spec.candidates, self._label(content, spec)),
            target=spec.target,
            anchor_pos=len(prompt),
            answer_pos=len(prompt),
            padding=padding.record(),
        )

    def items(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> list[ProbeItem]:
        contents = self._contents(n_samples, rng)
        placer = AnswerPlacer(
            self.encode, self.decode, self.step, self.align, self._head(), self.max_len, self.single_run
        )
        placements = [
            placer.place(*spec.prompt.split("{pad}"), (spec.pad_unit,), offsets, self._label(c, spec))
            for c, spec in enumerate(contents)
        ]
        self.contents, self.placements = contents, placements  # set together: spec() pairs them
        return [
            self._item(c, spec, placed, d)
            for c, (spec, placed) in enumerate(zip(contents, placements, strict=True))
            for d in offsets
        ]


def build(ctx: ProbeContext) -> PaddingCompletionProbe:
    """The built-in code prompts, or the prompts given (``--probe-file`` / ``completion=``)."""
    given = ctx.completion
    if given is None and ctx.spec.options.probe_file:
        given = CompletionSpec.list_from_file(ctx.spec.options.probe_file)
    step, align = ctx.geometry.step, ctx.geometry.align
    single_run = ctx.spec.options.single_run
    return PaddingCompletionProbe(
        ctx.need_tokenizer(), given, ctx.bos_id, step, align, max_len=ctx.max_len, single_run=single_run
    )
