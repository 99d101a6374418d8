"""kv-retrieval's options and the parameters each of its two forms is built from, declared once:
``Options`` holds what `phasescope sweep` sets (--design, --depth, --kv-gaps, ...) and checks it;
``KVRetrievalSpec`` (native ids) and ``TextKVSpec`` (text) are those options plus the haystack's
size, which only Python sets. Both are what the probe's description in spec.json records
(``Probe.spec``), so an option added here is recorded, and an older run reads it at its default.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from phasescope.designs import DESIGN_HELP, DESIGNS
from phasescope.errors import ProbeError
from phasescope.probes.options import ProbeOptions, chat_template_option, filler_option, option, parse_gaps
from phasescope.probes.pairs import FORMATS, LEGACY

MAX_CONTEXT = 4_194_304  # refuse absurd --context-tokens before building millions of tokens


def parse_lengths(text: str) -> int | tuple[int, ...]:
    """'4096' -> 4096; '1024,2048' -> (1024, 2048) (one band each); '2K' style suffixes are not read."""
    try:
        values = tuple(int(x.replace("_", "")) for x in str(text).split(",") if x.strip())
    except ValueError:
        raise ProbeError(
            f"--context-tokens {text!r}: use a number of tokens or several separated by commas, e.g. 1024,2048,4096"
        ) from None
    if not values:
        raise ProbeError("--context-tokens is empty: give a number of tokens, e.g. 4096")
    return values[0] if len(values) == 1 else values


PAIR_FORMATS = ("auto", *FORMATS)


@dataclass(frozen=True)
class Options(ProbeOptions):
    """kv-retrieval's `phasescope sweep` options (probes/options.py)."""

    design: str = option("shift-needle", DESIGN_HELP, metavar="DESIGN")
    depth: float = option(
        0.5,
        "kv-retrieval: where the needle sits in the haystack, 0 (earliest) to 1 (latest).",
        metavar="X",
        minimum=0.0,
        maximum=1.0,
    )
    kv_gaps: tuple[int, ...] = option(
        (0,),
        "kv-retrieval: tokens between the needle's key and value, one rendering each (e.g. 0,1); separates "
        "same-window from split-window at equal value phase.",
        metavar="GAPS",
        parse=parse_gaps,
    )
    context_tokens: int | tuple[int, ...] | None = option(
        None,
        "kv-retrieval: fill this many tokens with pairs (needle in a haystack at 128K: 131072); several lengths, "
        "comma separated (e.g. 1024,4096), sweep every content at each, one length band each (records carry "
        "context_tokens; statistics and compare --paired read by band). Default: a haystack just long enough to put "
        "the needle beyond the raw window.",
        metavar="N[,N...]",
        parse=parse_lengths,
    )
    pair_format: str = option(
        "auto",
        "kv-retrieval in text: pieces (one vocabulary piece each, ' house'; on a multilingual vocabulary often "
        "word fragments; 'words' is its old name), numbers (six digits), codes (like k7f2-9xq3) or auto (pieces "
        "when the tokenizer has enough, else numbers: ~16K pairs at 128K on DeepSeek-V4's tokenizer).",
        metavar="FORMAT",
    )
    filler: str | None = filler_option()
    chat_template: bool = chat_template_option()
    same_phase: bool = option(
        True,
        "text kv-retrieval: move each content's needle by under one step so every content's answer sits at "
        "phase 0 at offset 0 (one phase per offset; records say the move). --mixed-phase: each content starts "
        "where its text puts it. The statistics take either.",
        off_flag="--mixed-phase",
    )

    def __post_init__(self) -> None:
        if self.pair_format in LEGACY:  # an old name: the same format, recorded by its name now
            object.__setattr__(self, "pair_format", LEGACY[self.pair_format])
        lengths = self.context_tokens
        if isinstance(lengths, (list, tuple, range)):  # one length is a number, as before bands existed
            lengths = tuple(lengths)
            object.__setattr__(self, "context_tokens", lengths[0] if len(lengths) == 1 else lengths)
        super().__post_init__()

    def check(self) -> None:
        if self.design not in DESIGNS:
            raise ProbeError(f"--design {self.design!r} is invalid; allowed: {' | '.join(DESIGNS)}")
        if not 0 <= self.depth <= 1:
            raise ProbeError(f"--depth {self.depth!r} is invalid; allowed: a fraction in [0, 1] (0.5: the middle)")
        gaps = list(self.kv_gaps)
        if not gaps or any(not isinstance(g, int) or g < 0 for g in gaps) or len(set(gaps)) != len(gaps):
            raise ProbeError(f"--kv-gaps {self.kv_gaps!r} is invalid; allowed: distinct integers >= 0, e.g. 0,1")
        if self.pair_format not in PAIR_FORMATS:
            raise ProbeError(f"--pair-format {self.pair_format!r} is invalid; allowed: {' | '.join(PAIR_FORMATS)}")
        if self.filler is not None and (not isinstance(self.filler, str) or not self.filler):
            raise ProbeError(f"--filler {self.filler!r} is invalid; allowed: non-empty text such as ' .'")
        for n in self.lengths():
            if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 64 <= n <= MAX_CONTEXT):
                raise ProbeError(
                    f"--context-tokens: context_tokens={n!r} is invalid; allowed: 64 .. {MAX_CONTEXT} (e.g. 131072), "
                    "or several, comma separated (1024,2048,4096)"
                )
        if isinstance(self.context_tokens, tuple) and len(set(self.context_tokens)) != len(self.context_tokens):
            raise ProbeError(f"--context-tokens {self.context_tokens!r} lists a length twice; list each once")

    def lengths(self) -> list[int | None]:
        """The length bands: [None] (the default length), [N], or each of several."""
        if isinstance(self.context_tokens, tuple):
            return list(self.context_tokens)
        return [self.context_tokens]

    def at_length(self, n: int | None):
        """These options at one length band."""
        return replace(self, context_tokens=n)

    @classmethod
    def of(cls, options: Options, **sizes):
        """These parameters from the command line's ``options`` and the haystack's ``sizes``."""
        return cls(**{f.name: getattr(options, f.name) for f in fields(Options)}, **sizes)


def _check_sizes(n_pairs: int | None, n_distractors: int) -> None:
    if n_distractors < 0 or (n_pairs is not None and n_pairs < n_distractors + 2):
        raise ProbeError(
            f"n_pairs={n_pairs}, n_distractors={n_distractors} is invalid; allowed: n_distractors >= 0 and "
            "n_pairs >= n_distractors + 2 (the needle, the distractors and one more pair)"
        )


@dataclass(frozen=True)
class KVRetrievalSpec(Options):
    """The native probe's parameters: the options, and the haystack's pairs (default: the task's;
    longer rows when raised) and the other values scored as candidates."""

    n_pairs: int | None = None
    n_distractors: int = 3

    def check(self) -> None:
        super().check()
        _check_sizes(self.n_pairs, self.n_distractors)


@dataclass(frozen=True)
class TextKVSpec(Options):
    """The text probe's parameters: the options, at least ``n_pairs`` pairs (raised until the
    needle sits beyond the raw window; ignored under ``context_tokens``) and the distractors."""

    n_pairs: int = 24
    n_distractors: int = 3

    def check(self) -> None:
        super().check()
        _check_sizes(self.n_pairs, self.n_distractors)
