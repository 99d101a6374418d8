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

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from phasescope.errors import InputError
from phasescope.probes.base import Probe, ProbeError, ProbeItem
from phasescope.runfiles import read_json
from phasescope.validation import build

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
        data = read_json(Path(path), "probe file", 'expected {"prompt": "...{pad}...", "candidates": {...}, ...}')
        try:
            return build(cls, data, f"{path}")
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
        """The first of unit, " unit", "unit " whose n repeats add exactly n tokens, all the same,
        and leave the tokens before and after the padding unchanged."""
        tried = []
        for unit in (self.params.pad_unit, " " + self.params.pad_unit, self.params.pad_unit + " "):
            if all(self._pads_cleanly(unit, n) for n in offsets):
                return unit
            tried.append(repr(unit))
        raise ProbeError(
            f"no pad unit adds exactly one token per repeat without changing its neighbours with this tokenizer "
            f"(tried {', '.join(tried)}); BPE merges runs of such units or joins them to the text around "
            "{pad}: pass another pad_unit"
        )

    def _pads_cleanly(self, unit: str, n: int) -> bool:
        before, after = self.params.prompt.split("{pad}")
        bare = self._ids(before + after)
        padded = self._ids(before + unit * n + after)
        if len(padded) != len(bare) + n:
            return False
        # the padding must be n copies of one token, with the unpadded prompt's tokens on both sides
        for split in range(len(bare) + 1):
            if padded[:split] == bare[:split] and padded[split + n :] == bare[split:]:
                pad = padded[split : split + n]
                return len(set(pad)) <= 1
        return False

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
