"""Stage 1 of every drift-adjusted statistic: one accuracy effect per sweep column, conditional on
the contents.

A *column* is one (offset, phase) pair; with aligned probes (every content's anchor at the same
base position) it is simply an offset. The model, fitted to the records (a linear probability
model, contents as clusters)::

    correct = alpha[content] + delta[column] + noise

``alpha`` absorbs each content's difficulty, so ``delta`` compares columns *within* contents:
a hard content that is missing at some phase cannot make that phase look bad (a pooled mean
per offset would).

Contents that start at different phases (a real tokenizer: each content's answer lands at its
own phase at offset 0) share no column: content A is seen at (0, 1), (1, 2), ..., content B at
(0, 2), (1, 3), .... The columns then fall into *components* (columns linked through some
content), and ``delta`` is identified only within a component: its first column is 0 in each,
the others are differences from it. Stage 2 gives every component its own intercept and one
shared drift and phase effects, so components are compared through the shared trend -- which
is exactly why drift and phase are separable when contents start at different phases.
Columns whose component holds no other column (contents seen at one column only) carry no
within-content comparison and are left out.

Everything later (the drift trend, phase effects, gap, homogeneity, period, lack of fit) is a
linear function of ``delta``, fitted in stage 2 (``trend``, ``phase_effects``, ``period``), so one
wild cluster bootstrap of stage 1 serves them all: each draw gives ``delta* - delta`` and its
cluster-robust covariance, and a stage-2 statistic maps them linearly (``Linear``).

Shape legend: M cells, J columns, F free columns (not a component's reference), B bootstrap
draws, K stage-2 coefficients.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from phasescope.analysis.cluster_ols import ClusterFit, fit, full_rank, within
from phasescope.analysis.records import Cells, unique_rows

MIN_CONTENTS = 10  # below this many contents whose answers vary: no interval, no p-value


def few_varying_advice(n_informative: int, n_contents: int) -> str:
    """What to do about too few contents whose answers vary: more samples only when few were swept;
    when most answer alike at every offset, more of the same will not help."""
    if n_contents < 2 * MIN_CONTENTS:
        return "raise --samples"
    return (
        f"{n_contents - n_informative} of {n_contents} contents answer alike at every offset: whatever decides "
        "them does not move with this design's phase"
    )


@dataclass
class OffsetEffects:
    offset: np.ndarray  # [J]
    phase: np.ndarray  # [J]
    weight: np.ndarray  # [J] records in each column
    effect: np.ndarray  # [J] delta (each component's first column is its reference, 0)
    cov: np.ndarray  # [J,J] cluster-robust covariance (the reference columns' rows and columns are zero)
    n_contents: int  # contents with records
    n_informative: int  # contents whose answers are not all the same
    model: ClusterFit | None = None  # stage 1's fit, for the bootstrap (None: too few contents to bootstrap)
    rng: np.random.Generator | None = None
    n_boot: int = 0
    _draws: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)  # ``draws()``
    component: np.ndarray | None = None  # [J] the component of each column (None: one component)
    estimated: np.ndarray | None = None  # [J] True where delta is a free parameter (not a reference)

    def __post_init__(self):
        if self.component is None:
            self.component = np.zeros(len(self.offset), dtype=np.int64)
        if self.estimated is None:
            self.estimated = np.arange(len(self.offset)) > 0

    @property
    def n_components(self) -> int:
        return int(self.component.max()) + 1 if len(self.component) else 0

    @property
    def inference(self) -> bool:
        """Intervals and p-values are given only with enough contents whose answers vary."""
        return self.model is not None and self.n_boot > 0

    def draws(self) -> tuple[np.ndarray, np.ndarray]:
        """The bootstrap of the free columns (``estimated``): delta* - delta [B,F] and each draw's
        cluster-robust covariance [B,F,F]; drawn on first use, so a design that cannot be tested
        never pays for it (a reference column's delta is 0 in every draw)."""
        if self._draws is None:
            deltas, covs = zip(*self.model.draws(self.rng, self.n_boot), strict=True)
            self._draws = (np.concatenate(deltas), np.concatenate(covs))
        return self._draws

    def aligned(self) -> bool:
        """One phase per offset (every content's anchor at the same base position)."""
        return len(np.unique(self.offset)) == len(self.offset)


@dataclass
class Linear:
    """A stage-2 linear map ``theta = A @ delta`` with its covariance and bootstrap draws."""

    theta: np.ndarray  # [K]
    cov: np.ndarray  # [K,K]
    boot: np.ndarray | None  # [B,K] theta* - theta
    boot_cov: np.ndarray | None  # [B,K,K] (only when asked: studentized statistics)

    @property
    def se(self) -> np.ndarray:
        return np.sqrt(np.maximum(np.diag(self.cov), 0.0))


def linear(fx: OffsetEffects, a: np.ndarray, with_cov: bool = True) -> Linear:
    """theta = a @ delta for a [K,J], with the covariance a V aᵀ and the draws mapped the same way."""
    boot = boot_cov = None
    if fx.inference:
        delta, cov = fx.draws()
        free = a[:, fx.estimated]  # [K,F]: the reference columns do not move
        boot = delta @ free.T
        if with_cov:
            boot_cov = sandwich(free, cov)
    return Linear(a @ fx.effect, a @ fx.cov @ a.T, boot, boot_cov)


def sandwich(a: np.ndarray, cov: np.ndarray) -> np.ndarray:
    """a @ cov[b] @ aᵀ for every draw b: a [K,F], cov [B,F,F] (symmetric) -> [B,K,K], as two
    large matrix products (a broadcast product of B small ones took a third of analyze)."""
    n, f, k = len(cov), cov.shape[1], len(a)
    right = (cov.reshape(n * f, f) @ a.T).reshape(n, f, k)  # cov aᵀ
    return (right.transpose(0, 2, 1).reshape(n * k, f) @ a.T).reshape(n, k, k)  # (cov aᵀ)ᵀ aᵀ = a cov aᵀ


def components(col: np.ndarray, content: np.ndarray, n_cols: int, n_contents: int) -> np.ndarray:
    """[J] the component of each column: columns are linked when some content is seen at both
    (connected components of the content-column graph), numbered in order of their first column."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    n = n_cols + n_contents
    edges = coo_matrix((np.ones(len(col)), (col, n_cols + content)), shape=(n, n))
    _, label = connected_components(edges, directed=False)
    _, first = np.unique(label[:n_cols], return_index=True)
    order = np.argsort(np.argsort(first))  # components numbered by their first column
    return order[np.unique(label[:n_cols], return_inverse=True)[1].reshape(-1)]


def columns(cells: Cells) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (offset, phase) pairs [J,2] sorted by offset, and each cell's column [M]."""
    return unique_rows(np.stack([cells.offset, cells.phase], axis=1))


def informative_contents(cells: Cells) -> int:
    """Contents with at least one right and one wrong record (continuous outcomes: whose cell
    means are not all equal)."""
    if cells.continuous:
        mean = cells.k / cells.n
        low = np.full(cells.n_contents, np.inf)
        high = np.full(cells.n_contents, -np.inf)
        np.minimum.at(low, cells.content, mean)
        np.maximum.at(high, cells.content, mean)
        return int((high > low).sum())
    right = np.bincount(cells.content, weights=cells.k, minlength=cells.n_contents)
    total = np.bincount(cells.content, weights=cells.n, minlength=cells.n_contents)
    return int(((right > 0) & (right < total)).sum())


def fit_offset_effects(cells: Cells, rng: np.random.Generator, n_boot: int) -> OffsetEffects | None:
    """Stage 1 with its wild cluster bootstrap; None when no two columns are compared within a
    content."""
    cells = _comparable(cells)
    if cells is None:
        return None
    pairs, col = columns(cells)
    n_cols = len(pairs)
    weight = np.bincount(col, weights=cells.n, minlength=n_cols)
    n_contents = int((np.bincount(cells.content, minlength=cells.n_contents) > 0).sum())
    informative = informative_contents(cells)
    component = components(col, cells.content, n_cols, cells.n_contents)
    estimated = np.ones(n_cols, dtype=bool)
    estimated[np.unique(component, return_index=True)[1]] = False  # each component's first column: its reference
    free = np.flatnonzero(estimated)
    dummies = (col[:, None] == free[None]).astype(float)
    x = within(dummies, cells.content, cells.n, cells.n_contents)
    if not full_rank(x, cells.n):
        return None
    y = within(cells.accuracy, cells.content, cells.n, cells.n_contents)
    model = fit(x, y, cells.n, cells.content, cells.n_contents)
    effect = np.zeros(n_cols)
    effect[free] = model.beta
    cov = np.zeros((n_cols, n_cols))
    cov[free[:, None], free[None, :]] = model.covariance
    fx = OffsetEffects(
        pairs[:, 0], pairs[:, 1], weight, effect, cov, n_contents, informative, component=component, estimated=estimated
    )
    if informative >= MIN_CONTENTS and n_boot > 0:
        # a generator of its own, spawned now: the draws are the same whenever they are first used
        fx.model, fx.rng, fx.n_boot = model, np.random.default_rng(rng.integers(2**63)), n_boot
    return fx


def _comparable(cells: Cells) -> Cells | None:
    """The cells of contents seen at two columns or more (the others carry no within-content
    comparison); None when fewer than two columns remain."""
    _, col = columns(cells)
    seen, _ = unique_rows(np.stack([cells.content, col], axis=1))
    keep = np.bincount(seen[:, 0], minlength=cells.n_contents)[cells.content] >= 2
    if not keep.any():
        return None
    kept = replace(cells, **{name: getattr(cells, name)[keep] for name in ("content", "offset", "phase", "n", "k")})
    return kept if len(columns(kept)[0]) >= 2 else None
