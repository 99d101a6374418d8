"""The built-in content set of ``padding-completion``: short Python functions whose next token
has a plausible wrong twin, each with several docstring phrasings.

A content is one function × one docstring phrasing. Every function follows the study's shape:
a docstring whose first line says what the function does, then a line of padding ({pad},
repeated n = offset times), then code whose last line stops just before the answer::

    def quantize_fp8(x):
        \"\"\"Scale a tensor into the FP8 range and cast it.      <- {doc}: one of DOC_PHRASINGS
    ==========                                                <- {pad}: the pad unit, n times
        \"\"\"
        ...
        return y.to(torch.float                               <- right "8", wrong "32"

The wrong answer is primed by the code itself (``torch.float32`` earlier, a ``dim=0`` that is
not the one asked for ...), as in the study. Every prompt ends inside a word or a number and
every answer starts with a digit or punctuation, so that BPE tokenizers keep the answer apart
from the prompt's last token; ``PaddingCompletionProbe`` checks this per content anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from phasescope.probes.base import ProbeError


@dataclass(frozen=True)
class CodePrompt:
    name: str
    summary: str  # what the function does, lower case, no final period ("scale a tensor ... and cast it")
    code: str  # contains {doc} and {pad} once each
    right: str
    wrong: str


_HEADER = '''{imports}


def {signature}:
    """{{doc}}
{{pad}}
    """
'''


def _prompt(name, summary, imports, signature, body, right, wrong) -> CodePrompt:
    return CodePrompt(name, summary, _HEADER.format(imports=imports, signature=signature) + body, right, wrong)


PROMPTS: tuple[CodePrompt, ...] = (
    # the study's prompt: the first phrasing of its docstring gives FP8_PROMPT exactly
    _prompt(
        "fp8-cast",
        "scale a tensor into the FP8 range and cast it",
        "import torch",
        "quantize_fp8(x: torch.Tensor) -> torch.Tensor",
        "    amax = x.abs().max().to(torch.float32)\n"
        "    scale = 448.0 / amax.clamp(min=1e-12)\n"
        "    y = (x * scale).clamp(-448.0, 448.0)\n"
        "    return y.to(torch.float",
        "8",
        "32",
    ),
    _prompt(
        "int8-cast",
        "quantize a tensor to int8 with one scale per row",
        "import torch",
        "quantize_int8(x: torch.Tensor) -> torch.Tensor",
        "    amax = x.abs().amax(dim=-1, keepdim=True).to(torch.float32)\n"
        "    q = torch.round(x * 127.0 / amax).clamp(-128, 127)\n"
        "    return q.to(torch.int",
        "8",
        "32",
    ),
    _prompt(
        "uint8-image",
        "turn an array of values in [0, 1] into an 8-bit image",
        "import numpy as np",
        "to_image(x: np.ndarray) -> np.ndarray",
        "    x = np.clip(x * 255.0, 0, 255).astype(np.float32)\n    return np.round(x).astype(np.uint",
        "8",
        "16",
    ),
    _prompt(
        "bf16-cast",
        "cast activations to bfloat16 for the matmul",
        "import torch",
        "to_bf16(x: torch.Tensor) -> torch.Tensor",
        "    if x.dtype == torch.float16:\n        x = x.float()\n    return x.to(torch",
        ".bfloat16",
        ".float16",
    ),
    _prompt(
        "softmax-dim",
        "normalize attention scores over the keys",
        "import torch",
        "attention_probs(scores: torch.Tensor) -> torch.Tensor",
        "    # scores: [queries, keys]; the weights of one query sum to one\n"
        "    scores = scores - scores.amax(dim=-1, keepdim=True)\n"
        "    return torch.softmax(scores, dim",
        "=-1",
        "=0",
    ),
    _prompt(
        "mean-pool-dim",
        "average token vectors over the unmasked tokens",
        "import torch",
        "mean_pool(hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor",
        "    # hidden: [batch, tokens, features]; mask: [batch, tokens]\n"
        "    weights = mask.unsqueeze(-1).to(hidden.dtype)\n"
        "    return (hidden * weights).sum(dim=1) / weights.sum(dim",
        "=1",
        "=-1",
    ),
    _prompt(
        "causal-diagonal",
        "build the mask of future positions a query must not see",
        "import torch",
        "causal_mask(n: int) -> torch.Tensor",
        "    # True marks a key after the query; the query itself stays visible\n"
        "    ones = torch.ones(n, n, dtype=torch.bool)\n"
        "    return torch.triu(ones, diagonal=",
        "1",
        "0",
    ),
    _prompt(
        "previous-index",
        "return the differences between consecutive values",
        "",
        "differences(values: list[float]) -> list[float]",
        "    out = []\n    for i in range(1, len(values)):\n        out.append(values[i] - values[i",
        " - 1]",
        " + 1]",
    ),
)

# first docstring lines; {What}/{what}: the function's summary, capitalised or not
DOC_PHRASINGS: tuple[str, ...] = (
    "{What}.",
    "Helper: {what}.",
    "Utility to {what}.",
    "This function will {what}.",
    "{What} (used by the inference kernels).",
    "{What}; see the tests for examples.",
    "Internal. {What}.",
    "TODO: benchmark. {What}.",
)


def render(prompt: CodePrompt, phrasing: str) -> str:
    """The prompt text with its docstring line filled in; {pad} is left for the probe."""
    what = prompt.summary
    doc = phrasing.replace("{What}", what[0].upper() + what[1:]).replace("{what}", what)
    return prompt.code.replace("{doc}", doc).lstrip("\n")  # a function without imports starts at "def"


def combinations(n: int, rng: np.random.Generator) -> list[tuple[int, int]]:
    """n distinct (prompt, phrasing) index pairs, deterministic given ``rng``.

    Content i uses prompt ``i mod P`` (in a shuffled order) and, within each round of P
    contents, a phrasing rotated by the prompt, so a few contents already cover every
    function and the phrasings are used evenly. Asking for more than P × Q contents is
    refused: repeating a content would count one deterministic score twice, as if it were an
    independent sample, and shrink every interval.
    """
    n_prompts, n_phrasings = len(PROMPTS), len(DOC_PHRASINGS)
    if n > n_prompts * n_phrasings:
        raise ProbeError(
            f"padding-completion has {n_prompts * n_phrasings} distinct built-in contents ({n_prompts} functions x "
            f"{n_phrasings} docstring phrasings); {n} were asked: pass --samples {n_prompts * n_phrasings} or fewer, "
            "or more prompts with --probe-file"
        )
    prompts, phrasings = rng.permutation(n_prompts), rng.permutation(n_phrasings)
    out = []
    for i in range(n):
        j, rnd = i % n_prompts, i // n_prompts
        out.append((int(prompts[j]), int(phrasings[(rnd + j) % n_phrasings])))
    return out
