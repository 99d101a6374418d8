"""The study's `=` padding on the real DeepSeek-V4 (and Qwen3) tokenizer: why phase control
must be measured, and what phasescope sends instead.

    .venv/bin/python experiments/pad_table.py [--write]

Prints two tables per tokenizer (``--write`` puts them into docs/sweeps.md):

1. a docstring of n `=` signs (``'\"\"\"' + '=' * n + '\"\"\"'``) in tokens, for n = 1..20, and the
   study's FP8 helper padded with one run of n `=`: its answer's token position and phase
   (mod 4) -- the phase does not advance one per `=`;
2. the padding phasescope's padding-completion probe measures for that helper at offsets
   0..7 (step 4): text, `=` count, tokens, and the answer's position and phase.

Takes a few seconds (tokenizers only, no model).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from _markdown import replace_block, table

from phasescope.backends.tokenizers import named_tokenizer
from phasescope.probes.padding_completion import FP8_PROMPT, CompletionSpec, PaddingCompletionProbe

DOCS = Path(__file__).resolve().parents[1] / "docs" / "sweeps.md"
STEP = 4


def run_table(tok, bos: list[int]) -> str:
    """n `=` signs: docstring tokens, and the FP8 helper's answer position with one run of n."""
    before, after = FP8_PROMPT.split("{pad}")
    rows = []
    for n in range(1, 21):
        docstring = len(tok.encode('"""' + "=" * n + '"""', add_special_tokens=False))
        answer = len(bos) + len(tok.encode(before + "=" * n + after, add_special_tokens=False))
        rows.append([str(n), str(docstring), str(answer), str(answer % STEP)])
    return table(["`=` signs n", "docstring tokens", "FP8 answer position", f"phase (mod {STEP})"], rows)


def measured_table(tok, bos: list[int]) -> str:
    """What the probe sends at offsets 0..7: the padding it measured for each answer position."""
    probe = PaddingCompletionProbe(tok, CompletionSpec(), bos_id=bos[0] if bos else None, step=STEP)
    items = probe.items(list(range(8)), 1, np.random.default_rng(0))
    rows = [
        [
            str(it.offset),
            "`" + repr(it.padding["text"]).strip("'") + "`",
            str(it.padding["units"]),
            str(it.padding["tokens"]),
            str(it.answer_pos),
            str(it.answer_pos % STEP),
        ]
        for it in items
    ]
    return table(["offset", "padding", "`=` signs", "padding tokens", "answer position", "phase"], rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="put the tables into docs/sweeps.md")
    args = parser.parse_args()
    blocks = []
    for name in ("deepseek-v4", "qwen3"):
        tok = named_tokenizer(name)
        bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
        text = f"**{name}** ({len(tok):,} ids)\n\n{run_table(tok, bos)}\n\n{measured_table(tok, bos)}\n"
        print(text)
        blocks.append(text)
    if args.write:
        replace_block(DOCS, "pad-table", "\n".join(blocks))


if __name__ == "__main__":
    main()
