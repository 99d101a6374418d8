"""`phasescope analyze` at the study's scale: 1,000 contents x 48 offsets, one record per cell,
timed in one run for (a) accuracy only (one wild cluster bootstrap), (b) accuracy and the
log-prob margin (two bootstraps: what every run with log-probs pays), and (c) accuracy only with
the bootstrap as it was before the draws were laid out as used (``BEFORE_DRAWS`` /
``BEFORE_LINEAR`` below, the previous code kept here as the in-run baseline: a transposed view in
the refit scores, every stage-2 map a broadcast product over the full column space). The three
give the same numbers (checked).

Run:  .venv/bin/python benchmarks/analyze_scale.py [--contents 1000] [--offsets 48] [--quick]
"""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager
from dataclasses import replace

import numpy as np

from phasescope.analysis import cluster_ols, offset_effects
from phasescope.analysis.simulate import Scenario, simulate
from phasescope.analysis.stats import analyze_arrays


def before_draws(self, rng, n_boot):
    """ClusterFit.draws as it was: the refit scores through a transposed [C,K,b] view."""
    n_clusters, k = self.scores.shape
    chunk = max(8, min(cluster_ols.CHUNK, 4_000_000 // max(n_clusters * k, 1)))
    for start in range(0, n_boot, chunk):
        v = rng.choice(cluster_ols.WEBB, size=(min(chunk, n_boot - start), n_clusters))
        delta = (v @ self.scores) @ self.a_inv
        shifted = (self.hessians.reshape(n_clusters * k, k) @ delta.T).reshape(n_clusters, k, -1)
        scores = v[:, :, None] * self.scores[None] - shifted.transpose(2, 0, 1)
        meat = scores.transpose(0, 2, 1) @ scores
        yield delta, self.factor * self.a_inv @ meat @ self.a_inv


def before_linear(fx, a, with_cov=True):
    """offset_effects.linear as it was: the draws in the full column space, a broadcast product."""
    boot = boot_cov = None
    if fx.inference:
        delta, cov = fx.draws()
        free, n = np.flatnonzero(fx.estimated), len(delta)
        full_delta = np.zeros((n, len(fx.offset)))
        full_delta[:, free] = delta
        boot = full_delta @ a.T
        if with_cov:
            full_cov = np.zeros((n, len(fx.offset), len(fx.offset)))
            full_cov[:, free[:, None], free[None, :]] = cov
            boot_cov = a @ full_cov @ a.T
    return offset_effects.Linear(a @ fx.effect, a @ fx.cov @ a.T, boot, boot_cov)


@contextmanager
def previous_code():
    modules = [m for m in __import__("sys").modules.values() if getattr(m, "linear", None) is offset_effects.linear]
    saved_draws = cluster_ols.ClusterFit.draws
    cluster_ols.ClusterFit.draws = before_draws
    for module in modules:
        module.linear = before_linear
    try:
        yield
    finally:
        cluster_ols.ClusterFit.draws = saved_draws
        for module in modules:
            module.linear = offset_effects.linear


def same_numbers(a: dict, b: dict) -> bool:
    """The gap, its interval and p-values agree to rounding."""
    keys = ("gap_pp", "gap_p_value", "homogeneity_p_value", "gap_ci_pp")
    return all((a[k] is None and b[k] is None) or np.allclose(a[k], b[k], rtol=1e-9, atol=1e-12) for k in keys)


def best_of(repeats: int, run) -> tuple[float, dict]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--contents", type=int, default=1000)
    parser.add_argument("--offsets", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a smoke run: 60 contents x 24 offsets, 200 draws")
    args = parser.parse_args()
    contents, n_offsets, repeats, draws = (
        (60, 24, 1, 200) if args.quick else (args.contents, args.offsets, args.repeats, 2000)
    )
    scenario = Scenario(
        n_contents=contents, offsets=tuple(range(n_offsets)), records_per_cell=(1, 1), effects_pp=(0, 20, 0, 0)
    )
    accuracy = simulate(scenario, np.random.default_rng(0))
    noise = np.random.default_rng(1).normal(0, 1, len(accuracy.correct))
    both = replace(accuracy, margin=2 * accuracy.correct - 1 + noise)
    import phasescope.analysis.log_score  # noqa: F401  (imported before the swap, so it is swapped too)

    one, m_one = best_of(repeats, lambda: analyze_arrays(accuracy, n_resamples=draws))
    two, m_two = best_of(repeats, lambda: analyze_arrays(both, n_resamples=draws))
    with previous_code():
        before, m_before = best_of(repeats, lambda: analyze_arrays(accuracy, n_resamples=draws))
    same = same_numbers(m_one, m_before)
    print(f"analyze, {contents:,} contents x {n_offsets} offsets ({len(accuracy.correct):,} records), {draws} draws:")
    print("version | outcomes | seconds | vs the previous code, accuracy only")
    print(f"previous code | accuracy | {before:.2f} | 1.00x")
    print(f"this code | accuracy | {one:.2f} | {one / before:.2f}x")
    print(f"this code | accuracy + margin | {two:.2f} | {two / before:.2f}x")
    print(f"the same numbers as the previous code: {same}; the margin's gap: {m_two['log_score']['gap']:.3f} nats")


if __name__ == "__main__":
    main()
