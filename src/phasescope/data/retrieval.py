"""Key-value retrieval with filler (multi-query associative recall), on the model's own ids.

Vocabulary (``RetrievalTask.vocab_size`` ids)::

    0 pad | 1 bos | 2 query | keys [3, 3+n_keys) | values [.., +n_values) | filler [.., +n_filler)

One training row (key_len=2, value_len=1, n_queries=2; K = key token, V = value, f = filler,
Q = query marker; the lead of 0..23 filler tokens makes every phase mod 2, 3, 4, 6, 8, 12,
24 equally likely)::

    position  0   1  2  3   4   5  6   7   8   9  ...  40  41  42  43  44  45  46  47
    token     BOS f  f  K1  K1' V1 f   K2  K2' V2 ...  Q   K2  K2' V2  Q   K1  K1' V1
                        ^key_pos ^value_pos                         ^answer_pos
                                                    |<- query region: Q key value, ... ->|

The model reads the haystack of pairs, then for each query sees the marker and the key and
must produce the value: the loss (and accuracy) is on the answer value tokens only.
Queried pairs end more than ``min_distance`` tokens before the query region, so with
``min_distance >= L`` retrieval must go through the compressed cache, not the raw window.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from phasescope.errors import InputError
from phasescope.validation import build

PAD, BOS, QUERY = 0, 1, 2
N_SPECIAL = 3
# Random lead lengths 0..LEAD_CYCLE-1 make every phase of every step dividing 24 equally likely.
LEAD_CYCLE = 24
IGNORE = -100


@dataclass(frozen=True)
class RetrievalTask:
    """Sequences of key->value pairs with filler, then queries for some of the keys."""

    # the defaults are the tiny recipes' task (train.recipes.TINY_TASK), a valid 128-token row
    n_keys: int = 32  # distinct key tokens
    n_values: int = 32  # distinct value tokens
    n_filler: int = 8  # distinct filler tokens
    key_len: int = 1
    value_len: int = 1
    n_pairs: int = 16
    n_queries: int = 8
    max_gap: int = 2  # filler tokens between pairs: uniform 0..max_gap
    min_distance: int = 8  # queried pair ends more than this many tokens before the queries
    seq_len: int = 128

    def __post_init__(self) -> None:
        for name in (
            "n_keys",
            "n_values",
            "n_filler",
            "key_len",
            "value_len",
            "n_pairs",
            "n_queries",
            "seq_len",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"retrieval task: {name}={getattr(self, name)!r} is invalid; allowed: integer >= 1")
        for name in ("max_gap", "min_distance"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise InputError(f"retrieval task: {name}={getattr(self, name)!r} is invalid; allowed: integer >= 0")
        if self.n_queries > self.n_pairs:
            raise InputError(
                f"retrieval task: n_queries={self.n_queries} is invalid; allowed: at most n_pairs ({self.n_pairs})"
            )
        if self.n_keys**self.key_len < self.n_pairs:
            raise InputError(
                f"retrieval task: n_keys={self.n_keys} with key_len={self.key_len} gives fewer distinct keys "
                f"than n_pairs={self.n_pairs}; raise n_keys or key_len"
            )
        if self.seq_len < self.min_seq_len:
            raise InputError(
                f"retrieval task: seq_len={self.seq_len} is invalid; allowed: >= {self.min_seq_len} "
                f"(1 bos + up to {LEAD_CYCLE - 1} lead + {self.n_pairs} pairs with gaps + min_distance "
                f"{self.min_distance} + {self.n_queries} queries); lower n_pairs or raise seq_len"
            )

    @property
    def pair_len(self) -> int:
        return self.key_len + self.value_len

    @property
    def query_len(self) -> int:
        return 1 + self.pair_len

    @property
    def min_seq_len(self) -> int:
        haystack = 1 + (LEAD_CYCLE - 1) + self.n_pairs * (self.pair_len + self.max_gap)
        return haystack + self.min_distance + self.n_queries * self.query_len

    @property
    def vocab_size(self) -> int:
        return N_SPECIAL + self.n_keys + self.n_values + self.n_filler

    @property
    def key_ids(self) -> np.ndarray:
        return np.arange(N_SPECIAL, N_SPECIAL + self.n_keys)

    @property
    def value_ids(self) -> np.ndarray:
        return np.arange(N_SPECIAL + self.n_keys, N_SPECIAL + self.n_keys + self.n_values)

    @property
    def filler_ids(self) -> np.ndarray:
        start = N_SPECIAL + self.n_keys + self.n_values
        return np.arange(start, start + self.n_filler)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RetrievalTask:
        return build(cls, data, "retrieval task")


@dataclass
class RetrievalBatch:
    """input_ids [B,T]; targets [B,T] (IGNORE except where the next token is an answer);
    per query [B,Q]: key_pos, value_pos (first value token in the haystack), answer_pos
    (first answer token in the query; predicted from answer_pos-1)."""

    input_ids: np.ndarray
    targets: np.ndarray
    key_pos: np.ndarray
    value_pos: np.ndarray
    answer_pos: np.ndarray


def _distinct_keys(task: RetrievalTask, rng: np.random.Generator) -> np.ndarray:
    """n_pairs distinct keys of key_len tokens each: [n_pairs, key_len]."""
    codes = rng.choice(task.n_keys**task.key_len, size=task.n_pairs, replace=False)
    digits = (codes[:, None] // task.n_keys ** np.arange(task.key_len)[::-1]) % task.n_keys
    return task.key_ids[digits]


def sample_row(task: RetrievalTask, rng: np.random.Generator):
    """One sequence: (tokens [T], targets [T], key_pos [Q], value_pos [Q], answer_pos [Q])."""
    tokens = rng.choice(task.filler_ids, size=task.seq_len)
    tokens[0] = BOS
    keys = _distinct_keys(task, rng)
    values = task.value_ids[rng.integers(0, task.n_values, size=(task.n_pairs, task.value_len))]
    pos = 1 + int(rng.integers(0, LEAD_CYCLE))
    key_starts = np.empty(task.n_pairs, dtype=np.int64)
    for i in range(task.n_pairs):
        pos += int(rng.integers(0, task.max_gap + 1))
        key_starts[i] = pos
        tokens[pos : pos + task.key_len] = keys[i]
        tokens[pos + task.key_len : pos + task.pair_len] = values[i]
        pos += task.pair_len
    query_start = task.seq_len - task.n_queries * task.query_len
    value_ends = key_starts + task.pair_len - 1
    eligible = np.flatnonzero(value_ends < query_start - task.min_distance)
    asked = rng.choice(eligible, size=task.n_queries, replace=False)
    targets = np.full(task.seq_len, IGNORE, dtype=np.int64)
    answer_pos = np.empty(task.n_queries, dtype=np.int64)
    for j, pair in enumerate(asked):
        q = query_start + j * task.query_len
        tokens[q] = QUERY
        tokens[q + 1 : q + 1 + task.key_len] = keys[pair]
        answer = q + 1 + task.key_len
        tokens[answer : answer + task.value_len] = values[pair]
        targets[answer - 1 : answer - 1 + task.value_len] = values[pair]
        answer_pos[j] = answer
    return tokens, targets, key_starts[asked], key_starts[asked] + task.key_len, answer_pos


def sample_batch(task: RetrievalTask, batch_size: int, rng: np.random.Generator) -> RetrievalBatch:
    rows = [sample_row(task, rng) for _ in range(batch_size)]
    return RetrievalBatch(*(np.stack(column) for column in zip(*rows, strict=True)))


def phase_histogram(task: RetrievalTask, steps: tuple[int, ...], n_rows: int, rng: np.random.Generator) -> dict:
    """Share of queried value positions at each phase (align 0) for each step, over n_rows rows."""
    value_pos = np.concatenate([sample_row(task, rng)[3] for _ in range(n_rows)])
    return {s: np.bincount(value_pos % s, minlength=s) / len(value_pos) for s in steps}
