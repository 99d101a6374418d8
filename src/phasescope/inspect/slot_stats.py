"""Statistics of compressor slot weights shared by phasescope's decoder (inspect.preferences)
and transformers' DeepSeek-V4 (inspect.preferences_v4): which phase a window slot holds, and
per-row weights summarised with a bootstrap interval."""

from __future__ import annotations

import numpy as np


def slot_phase(slot: int, step: int, window: int) -> int:
    """Phase (docs/design.md, 'Definitions') of window slot ``slot`` (0 = oldest), for every head and align."""
    return (slot - window) % step


def _bootstrap(rows: np.ndarray, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """rows [R, w] -> percentile 95% interval of the row mean, each [w]."""
    idx = rng.integers(0, len(rows), size=(n, len(rows)))
    means = rows[idx].mean(axis=1)
    return np.percentile(means, 2.5, axis=0), np.percentile(means, 97.5, axis=0)


def summarise_rows(chunks: list[np.ndarray], rng: np.random.Generator, n_resamples: int) -> dict:
    """Per-row slot weights (chunks of [rows, Hk, w]) -> {"mean","std","ci_low","ci_high": [Hk][w], "n_rows"}."""
    rows = np.concatenate(chunks)  # [R, Hk, w]
    lo, hi = zip(*(_bootstrap(rows[:, h], rng, n_resamples) for h in range(rows.shape[1])), strict=True)
    return {
        "mean": rows.mean(axis=0).tolist(),
        "std": rows.std(axis=0, ddof=1 if len(rows) > 1 else 0).tolist(),
        "ci_low": np.stack(lo).tolist(),
        "ci_high": np.stack(hi).tolist(),
        "n_rows": int(len(rows)),
    }
