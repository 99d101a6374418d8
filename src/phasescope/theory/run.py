"""``run_theory``: the questions the model answers, as one JSON-able dict.

* main run (step S): per-start final pooling weights and qualities, the symmetry-break fraction,
  which offsets end weak, how spread the preferred offset is over starts;
* stability: curvature of the loss at uniform weights and the critical capacity d* per noise/step;
* capacity x noise: the final quality profile (best .. worst offset, averaged over starts);
* raw window: how a raw local window tilts which offsets the compressor keeps;
* by step s in {2, 4, 6, 8}: gap (best - worst offset quality) and the number of strong offsets.
"""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np

from phasescope.theory.flow import FlowConfig, critical_capacity, integrate, uniform_curvature

STEPS = (2, 4, 6, 8)
CAPACITIES = (4, 8, 16, 32, 64)
NOISES = (0.0, 0.25, 1.0)


def _round(x, digits=4):
    return np.round(np.asarray(x, dtype=float), digits).tolist()


def summarise(cfg: FlowConfig, out: dict) -> dict:
    """Per-setting summary. A start *broke symmetry* when its final weights differ by more than a
    tenth of a uniform share (max a - min a > 0.1/s; starts begin ~0.005/s apart); an offset is
    *weak* when its quality is < 0.5 (the right answer less likely than all wrong ones together);
    *unsettled* starts still moved their weights by > 0.01 over the last 10% of the snapshots."""
    s = cfg.step
    a, q, traj = out["a"], out["quality"], out["trajectory"]
    broken = (a.max(axis=1) - a.min(axis=1)) > 0.1 / s
    top = np.bincount(a.argmax(axis=1), minlength=s)
    tail = max(1, traj.shape[1] // 10)
    unsettled = np.abs(traj[:, -1] - traj[:, -1 - tail]).max(axis=1) > 0.01
    gap = q.max(axis=1) - q.min(axis=1)
    return {
        "step": s,
        "broken_fraction": float(broken.mean()),
        "unsettled_fraction": float(unsettled.mean()),
        "gap_pp_mean": float(100 * gap.mean()),
        "gap_pp_sd": float(100 * gap.std()),
        "strong_offsets_mean": float((q >= 0.5).sum(axis=1).mean()),
        "quality_sorted_mean": _round(np.sort(q, axis=1)[:, ::-1].mean(axis=0)),  # best .. worst
        "quality_by_offset_mean": _round(q.mean(axis=0)),
        "weight_by_offset_mean": _round(a.mean(axis=0)),
        "weak_fraction_by_offset": _round((q < 0.5).mean(axis=0)),
        "top_offset_counts": top.tolist(),  # how often each offset is a start's favourite
        "rho": _round(out["rho"]),
        "curvature_at_uniform": uniform_curvature(cfg),
        "final_loss_mean": float(out["loss"].mean()),
    }


def run_theory(
    step: int = 4,
    n_starts: int = 32,
    seed: int = 0,
    capacity: float = 16.0,
    noise: float = 0.25,
    vocab: int = 32,
    local: int = 0,
    horizon: float = 6000.0,
    init_scale: float = 0.01,
    n_trajectories: int = 6,
    on_setting=None,
) -> dict:
    """Integrate the gradient flow from ``n_starts`` near-uniform starts per setting and answer
    the module docstring's questions. Every setting draws its starts from
    ``numpy.random.default_rng([seed, k])`` (k numbers the distinct settings in order of first
    use), so results are reproducible. ``on_setting(k, cfg)``, when given, is called before the
    k-th distinct setting is integrated (a progress display: larger ``n_starts`` take minutes)."""
    base = FlowConfig(step, capacity, noise, vocab, local, 4, horizon, init_scale, "zero")
    memo: dict[FlowConfig, dict] = {}  # a setting that recurs (s = step, local = 0, ...) is run once

    def run(cfg):
        if cfg not in memo:
            if on_setting is not None:
                on_setting(len(memo) + 1, cfg)
            memo[cfg] = integrate(cfg, n_starts, np.random.default_rng([seed, len(memo)]))
        return memo[cfg]

    main = run(base)
    result = {
        "config": {**asdict(base), "n_starts": n_starts, "seed": seed},
        "main": summarise(base, main),
        "starts": [
            {"weights": _round(a), "quality": _round(q), "readout_gain": _round(g, 3)}
            for a, q, g in zip(main["a"], main["quality"], main["g"], strict=True)
        ],
        "trajectories": {
            "times": _round(main["times"], 2),
            "weights": _round(main["trajectory"][:n_trajectories], 4),  # (starts, snapshots, s)
        },
    }
    result["main"]["critical_capacity"] = critical_capacity(base)
    result["stability"] = [
        {"step": s, "noise": n, "critical_capacity": critical_capacity(replace(base, step=s, noise=n, local=0))}
        for s in STEPS
        for n in NOISES
    ]
    result["capacity_noise"] = []
    for n in NOISES:
        for d in CAPACITIES:
            cfg = replace(base, capacity=float(d), noise=n)
            row = summarise(cfg, run(cfg))
            result["capacity_noise"].append({"capacity": d, "noise": n, **_pick(row)})
    # Linear instability vs the co-adaptation transient: the same settings with the readout
    # starting at its optimum for near-uniform weights (breaks only where uniform is unstable).
    result["readout_init"] = []
    for d in CAPACITIES[2:]:
        for init in ("zero", "optimal"):
            cfg = replace(base, capacity=float(d), readout=init)
            row = summarise(cfg, run(cfg))
            result["readout_init"].append(
                {"capacity": d, "readout": init, **_pick(row, extra=("curvature_at_uniform",))}
            )
    result["raw_window"] = []
    for local_tokens in sorted({0, step, 2 * step, 3 * step}):
        cfg = replace(base, local=local_tokens)
        row = summarise(cfg, run(cfg))
        result["raw_window"].append({"local": local_tokens, **_pick(row, extra=("rho", "weight_by_offset_mean"))})
    result["by_step"] = []
    for s in STEPS:
        cfg = replace(base, step=s)
        row = summarise(cfg, run(cfg))
        result["by_step"].append({**_pick(row, extra=("gap_pp_sd", "curvature_at_uniform")), "step": s})
    return result


def _pick(row: dict, extra: tuple = ()) -> dict:
    keys = (
        "broken_fraction",
        "unsettled_fraction",
        "gap_pp_mean",
        "strong_offsets_mean",
        "quality_sorted_mean",
        "quality_by_offset_mean",
        "top_offset_counts",
    ) + tuple(extra)
    return {k: row[k] for k in keys}
