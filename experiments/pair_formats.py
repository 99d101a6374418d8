"""How many key-value pairs each `--pair-format` fits in a 128K-token NIAH prompt, on the real
DeepSeek-V4 and Qwen3 tokenizers (the study's layout: ~16,000 pairs at 131,072 tokens).

    .venv/bin/python experiments/pair_formats.py [--context 131072] [--write]

Builds one content at 8 offsets with the text kv-retrieval probe (token exactness checked as in
a sweep) and prints tokens per line and pairs per prompt; a format that runs out of distinct
keys before the context is full says so. ``--write`` puts the table into docs/sweeps.md.
About 30 s (tokenizers only, no model).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from _markdown import replace_block, table

from phasescope.backends.tokenizers import named_tokenizer
from phasescope.probes.base import ProbeError
from phasescope.probes.kv_retrieval_text import TextKVRetrievalProbe, TextKVSpec

DOCS = Path(__file__).resolve().parents[1] / "docs" / "sweeps.md"
EXAMPLES = {"pieces": " apple: house\n", "numbers": " 482913: 771204\n", "codes": " k7f2-9xq3: m2d8-a0pz\n"}


def row(tok, name: str, fmt: str, context: int) -> list[str]:
    line = str(len(tok.encode(EXAMPLES[fmt], add_special_tokens=False)))
    spec = TextKVSpec(pair_format=fmt, context_tokens=context)
    probe = TextKVRetrievalProbe(tok, spec, bos_id=tok.bos_token_id, min_gap=136)
    try:
        items = probe.items(list(range(8)), 1, np.random.default_rng(0))
    except ProbeError as err:
        return [name, fmt, line, f"refused: {str(err).split(';')[0]}", ""]
    return [name, fmt, line, f"{probe.pairs_used:,}", f"{len(items[0].input_ids):,}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=131072)
    parser.add_argument("--write", action="store_true", help="put the table into docs/sweeps.md")
    args = parser.parse_args()
    rows = []
    for name in ("deepseek-v4", "qwen3"):
        tok = named_tokenizer(name)
        rows += [row(tok, name, fmt, args.context) for fmt in EXAMPLES]
    header = ["tokenizer", "`--pair-format`", "tokens in the example line", f"pairs at {args.context:,}"]
    text = table([*header, "prompt tokens"], rows)
    print(text)
    if args.write:
        replace_block(DOCS, "pair-formats", text)


if __name__ == "__main__":
    main()
