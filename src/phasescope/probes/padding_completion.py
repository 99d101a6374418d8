"""``padding-completion``: a fixed prompt whose answer position is moved by padding.

A pad unit is repeated n times at a chosen place (default: inside a leading docstring, as
the study's ``=`` padding); n = offset sweeps the phase of the answer position, which is
the anchor. Built in: a short FP8 quantisation helper whose last line casts to
``torch.float8_e4m3fn``; the right next token is ``8``, the wrong one ``32`` (primed by
``torch.float32`` earlier in the code).

Token exactness is checked, not assumed: every repeat must add exactly one token and leave
the tokens around the pad unchanged; BPE often merges runs of ``=``, so the probe tries the
unit, then the unit with a leading and a trailing space, and raises ``ProbeError`` when
none works.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from phasescope.probes.base import Probe, ProbeError, ProbeItem

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

    @classmethod
    def from_file(cls, path: str | Path) -> CompletionSpec:
        """JSON with keys prompt, candidates, target, pad_unit."""
        data = json.loads(Path(path).read_text())
        unknown = sorted(set(data) - {"prompt", "candidates", "target", "pad_unit"})
        if unknown:
            raise ProbeError(f"{path}: unknown keys {unknown}; allowed: prompt, candidates, target, pad_unit")
        return cls(**data)

    def __post_init__(self) -> None:
        if self.prompt.count("{pad}") != 1:
            raise ProbeError("the prompt must contain the placeholder {pad} exactly once")
        if self.target not in self.candidates:
            raise ProbeError(f"target {self.target!r} is not one of the candidates {sorted(self.candidates)}")


def encoder(tokenizer):
    """A function text -> ids for a transformers tokenizer or a tokenizers.Tokenizer."""
    if hasattr(tokenizer, "encode_batch") and not hasattr(tokenizer, "convert_tokens_to_ids"):
        return lambda text: tokenizer.encode(text, add_special_tokens=False).ids
    return lambda text: list(tokenizer.encode(text, add_special_tokens=False))


class PaddingCompletionProbe(Probe):
    name = "padding-completion"
    summary = "fixed prompt; a pad unit repeated n times moves the answer position (needs a tokenizer)"

    def __init__(self, tokenizer, spec: CompletionSpec | None = None, bos_id: int | None = None):
        self.encode, self.params, self.bos = encoder(tokenizer), spec or CompletionSpec(), bos_id
        self.unit = None

    def spec(self) -> dict:
        return {
            "probe": self.name,
            "prompt": self.params.prompt,
            "candidates": self.params.candidates,
            "target": self.params.target,
            "pad_unit_asked": self.params.pad_unit,
            "pad_unit_used": self.unit,
        }

    def _ids(self, text: str) -> list[int]:
        return ([self.bos] if self.bos is not None else []) + self.encode(text)

    def _choose_unit(self, offsets: list[int]) -> str:
        base = self.params.pad_unit
        tried = []
        for unit in (base, " " + base, base + " "):
            reference = self._ids(self.params.prompt.replace("{pad}", ""))
            if all(
                len(self._ids(self.params.prompt.replace("{pad}", unit * n))) == len(reference) + n for n in offsets
            ):
                return unit
            tried.append(repr(unit))
        raise ProbeError(
            f"no pad unit adds exactly one token per repeat with this tokenizer (tried {', '.join(tried)}); "
            "BPE merges runs of such units; pass another pad_unit"
        )

    def items(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> list[ProbeItem]:
        self.unit = self._choose_unit(offsets)
        out = []
        for d in offsets:
            text = self.params.prompt.replace("{pad}", self.unit * d)
            prompt = self._ids(text)
            candidates = {}
            for name, answer in self.params.candidates.items():
                full = self._ids(text + answer)
                if full[: len(prompt)] != prompt:
                    raise ProbeError(
                        f"candidate {name!r} ({answer!r}) merges with the end of the prompt when tokenized; "
                        "end the prompt at a token boundary"
                    )
                candidates[name] = full[len(prompt) :]
            # one fixed prompt: a single content sample (scores are deterministic; n_samples is ignored)
            out.append(
                ProbeItem(
                    content_id=0,
                    offset=d,
                    input_ids=prompt,
                    candidates=candidates,
                    target=self.params.target,
                    anchor_pos=len(prompt),
                    answer_pos=len(prompt),
                )
            )
        return out
