"""Stage 1 of every drift-adjusted statistic: one accuracy effect per sweep column, conditional on
the contents.

A *column* is one (offset, phase) pair; with aligned probes (every content's anchor at the same
base position) it is simply an offset. The model, fitted to the records (a linear probability
model, contents as clusters)::

    correct = alpha[content] + delta[column] + noise

``alpha`` absorbs each content's difficulty, so ``delta`` compares columns *within* contents:
a hard content that is missing at some phase cannot make that phase look bad (a pooled mean
per offset would). ``delta`` of the first column is 0; the others are differences from it.

Everything later (the drift trend, phase effects, gap, homogeneity, period, lack of fit) is a
linear function of ``delta``, fitted in stage 2 (``trend``, ``phase_effects``, ``period``), so one
wild cluster bootstrap of stage 1 serves them all: each draw gives ``delta* - delta`` and its
cluster-robust covariance, and a stage-2 statistic maps them linearly (``Linear``).

Shape legend: M cells, J columns, B bootstrap draws, K stage-2 coefficients.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from phasescope.analysis.cluster_ols import ClusterFit, fit, full_rank, within
from phasescope.analysis.records import Cells

MIN_CONTENTS = 10  # below this many contents whose answers vary: no interval, no p-value


@dataclass
class OffsetEffects:
    offset: np.ndarray  # [J]
    phase: np.ndarray  # [J]
    weight: np.ndarray  # [J] records in each column
    effect: np.ndarray  # [J] delta (column 0 is the reference, 0)
    cov: np.ndarray  # [J,J] cluster-robust covariance (row and column 0 are zero)
    n_contents: int  # contents with records
    n_informative: int  # contents whose answers are not all the same
    model: ClusterFit | None = None  # stage 1's fit, for the bootstrap (None: too few contents to bootstrap)
    rng: np.random.Generator | None = None
    n_boot: int = 0
    _draws: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    @property
    def inference(self) -> bool:
        """Intervals and p-values are given only with enough contents whose answers vary."""
        return self.model is not None and self.n_boot > 0

    @property
    def boot_delta(self) -> np.ndarray | None:
        """[B,J] delta* - delta (drawn on first use: a design that cannot be tested never pays for it)."""
        return self._boot()[0] if self.inference else None

    @property
    def boot_cov(self) -> np.ndarray | None:
        """[B,J,J] the cluster-robust covariance of each draw."""
        return self._boot()[1] if self.inference else None

    def _boot(self) -> tuple[np.ndarray, np.ndarray]:
        if self._draws is None:
            deltas, covs = zip(*self.model.draws(self.rng, self.n_boot), strict=True)
            self._draws = (
                np.pad(np.concatenate(deltas), ((0, 0), (1, 0))),
                np.pad(np.concatenate(covs), ((0, 0), (1, 0), (1, 0))),
            )
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
        boot = fx.boot_delta @ a.T
        if with_cov:
            boot_cov = a @ fx.boot_cov @ a.T
    return Linear(a @ fx.effect, a @ fx.cov @ a.T, boot, boot_cov)


def columns(cells: Cells) -> tuple[np.ndarray, np.ndarray]:
    """Distinct (offset, phase) pairs [J,2] sorted by offset, and each cell's column [M]."""
    pairs, index = np.unique(np.stack([cells.offset, cells.phase], axis=1), axis=0, return_inverse=True)
    return pairs, index.reshape(-1)


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
    """Stage 1 with its wild cluster bootstrap; None when some column is not comparable within any
    content (every content seen there is seen nowhere else)."""
    pairs, col = columns(cells)
    n_cols = len(pairs)
    weight = np.bincount(col, weights=cells.n, minlength=n_cols)
    n_contents = int((np.bincount(cells.content, minlength=cells.n_contents) > 0).sum())
    informative = informative_contents(cells)
    if n_cols < 2:
        return None
    dummies = (col[:, None] == np.arange(1, n_cols)[None]).astype(float)
    x = within(dummies, cells.content, cells.n, cells.n_contents)
    if not full_rank(x, cells.n):
        return None
    y = within(cells.accuracy, cells.content, cells.n, cells.n_contents)
    model = fit(x, y, cells.n, cells.content, cells.n_contents)
    cov = np.zeros((n_cols, n_cols))
    cov[1:, 1:] = model.covariance
    fx = OffsetEffects(pairs[:, 0], pairs[:, 1], weight, np.r_[0.0, model.beta], cov, n_contents, informative)
    if informative >= MIN_CONTENTS and n_boot > 0:
        # a generator of its own, spawned now: the draws are the same whenever they are first used
        fx.model, fx.rng, fx.n_boot = model, np.random.default_rng(rng.integers(2**63)), n_boot
    return fx
