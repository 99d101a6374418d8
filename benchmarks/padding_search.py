"""The padding search of a long prompt: on the text around the padding with each offset's choice
checked on the whole prompt (``AnswerPlacer.place``) vs the whole-prompt search every time
(``AnswerPlacer._search``, the reference), same prompt, same run; the two placements must be equal.

Run:  .venv/bin/python benchmarks/padding_search.py [--repeats 400 4000] [--quick]

The prompt: the study's FP8 docstring prompt with REPEATS small functions before and after its
{pad}; offsets 0..11, step 4, pad units '=' then newline; both real tokenizers.
"""

from __future__ import annotations

import argparse
import time

from phasescope.backends.tokenizers import named_tokenizer
from phasescope.probes.padding import AnswerPlacer
from phasescope.probes.padding_completion import FP8_PROMPT, decoder, encoder

OFFSETS = list(range(12))


def long_prompt(repeat: int) -> tuple[str, str]:
    before, after = FP8_PROMPT.split("{pad}")
    filler = "".join(f"def helper_{i}(x):\n    return x * {i} + {i % 7}  # scale {i}\n\n" for i in range(repeat))
    return (
        filler + before,
        after + "\n" + filler + "    result = quantize_fp8(x)\n    assert result.dtype == torch.float",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, nargs="+", default=[400, 4000])
    parser.add_argument("--quick", action="store_true", help="a smoke run: one small prompt, Qwen3 only")
    args = parser.parse_args()
    names = ["qwen3"] if args.quick else ["qwen3", "deepseek-v4"]
    repeats = [60] if args.quick else args.repeats
    print("tokenizer | prompt tokens | around + check (s) | whole search (s) | speed-up | equal")
    for name in names:
        tokenizer = named_tokenizer(name)
        placer = AnswerPlacer(encoder(tokenizer), decoder(tokenizer), step=4, align=0, head=())
        for repeat in repeats:
            before, after = long_prompt(repeat)
            start = time.perf_counter()
            fast = placer.place(before, after, ("=", "\n"), OFFSETS, "benchmark")
            middle = time.perf_counter()
            lowest = len(placer.encode(before + after))
            slow, _ = placer._search(before, after, ("=", "\n"), OFFSETS, lowest)
            end = time.perf_counter()
            print(
                f"{name} | {lowest:,} | {middle - start:.2f} | {end - middle:.2f} | "
                f"{(end - middle) / (middle - start):.1f}x | {fast == slow}"
            )


if __name__ == "__main__":
    main()
