"""Figures of ``run_theory``'s result (matplotlib, Agg): weight trajectories, final quality per
offset, gap vs step, critical capacity. Each function reads only the JSON-able dict."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from phasescope.rundir.files import atomic_write_bytes  # noqa: E402


def write_figures(result: dict, out: Path) -> list[Path]:
    """Every figure in FIGURES as ``out/theory_{name}.png`` (`phasescope theory --out`, report.html)."""
    return [write_figure(result, name, out) for name in FIGURES]


def write_figure(result: dict, name: str, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    fig = FIGURES[name](result)
    path = out / f"theory_{name}.png"
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    atomic_write_bytes(path, buffer.getvalue())
    return path


def _trajectories(result):
    times = np.asarray(result["trajectories"]["times"])
    weights = np.asarray(result["trajectories"]["weights"])  # (starts, snapshots, s)
    n = len(weights)
    fig, axes = plt.subplots(1, n, figsize=(2.6 * n, 2.6), sharey=True, squeeze=False)
    for k, ax in enumerate(axes[0]):
        for j in range(weights.shape[2]):
            ax.plot(np.maximum(times, 0.5), weights[k, :, j], label=f"offset {j}")
        ax.set_xscale("log")
        ax.set_title(f"start {k}")
        ax.set_xlabel("flow time")
    axes[0, 0].set_ylabel("pooling weight a_j")
    axes[0, -1].legend(fontsize=7)
    cfg = result["config"]
    fig.suptitle(f"s={cfg['step']}, d={cfg['capacity']:g}, noise={cfg['noise']:g}: weights during training", y=1.04)
    return fig


def _quality(result):
    q = np.asarray([start["quality"] for start in result["starts"]])  # (starts, s)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3))
    s = q.shape[1]
    for j in range(s):
        axes[0].scatter(np.full(len(q), j) + np.random.default_rng(j).uniform(-0.15, 0.15, len(q)), q[:, j], s=8)
    axes[0].set_xticks(range(s))
    axes[0].set_xlabel("offset (phase)")
    axes[0].set_ylabel("final quality (p right)")
    axes[0].set_title("each start, by offset")
    for row in result["capacity_noise"]:
        if row["noise"] == result["config"]["noise"]:
            axes[1].plot(range(s), row["quality_sorted_mean"], marker="o", label=f"d={row['capacity']}")
    axes[1].set_xlabel("offset rank (best .. worst)")
    axes[1].set_title(f"mean sorted profile, noise={result['config']['noise']:g}")
    axes[1].legend(fontsize=7)
    return fig


def _gap_vs_step(result):
    rows = result["by_step"]
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.errorbar([r["step"] for r in rows], [r["gap_pp_mean"] for r in rows], [r["gap_pp_sd"] for r in rows], marker="o")
    ax.set_xlabel("step s")
    ax.set_ylabel("gap (best - worst offset), pp")
    cfg = result["config"]
    ax.set_title(f"d={cfg['capacity']:g}, noise={cfg['noise']:g}")
    return fig


def _stability(result):
    fig, ax = plt.subplots(figsize=(4, 3))
    for noise in sorted({r["noise"] for r in result["stability"]}):
        rows = [r for r in result["stability"] if r["noise"] == noise and r["critical_capacity"] is not None]
        ax.plot([r["step"] for r in rows], [r["critical_capacity"] for r in rows], marker="o", label=f"noise {noise:g}")
    ax.set_yscale("log")
    ax.set_xlabel("step s")
    ax.set_ylabel("critical capacity d*")
    ax.set_title("uniform pooling unstable below d*")
    ax.legend(fontsize=7)
    return fig


FIGURES = {
    "trajectories": _trajectories,
    "quality": _quality,
    "gap_vs_step": _gap_vs_step,
    "stability": _stability,
}
