"""Gradient flow of (theta, g) from near-uniform starts, and the stability of the uniform point.

Training is the gradient flow d(theta, g)/dt = -grad L, all starts at once as one ODE system,
integrated with an adaptive solver (scipy's LSODA). Fixed-step gradient descent is not used on
purpose: with step eta it diverges from a stable point whose curvature exceeds 2/eta, and that
fake instability looks exactly like symmetry breaking (it did here at eta = 0.5, s = 2).

Shapes: ``theta``, ``g``: (starts, s); trajectories: (starts, snapshots, s).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from phasescope.errors import InputError
from phasescope.theory.model import gradient, loss, quality, raw_coverage, softmax


@dataclass(frozen=True)
class FlowConfig:
    """One setting of the model. ``noise`` is sigma^2 relative to a token's squared norm (1)."""

    step: int = 4  # s: offsets per window
    capacity: float = 16.0  # d: entry dimension (the tiny models' head dim is 16)
    noise: float = 0.25  # sigma^2
    vocab: int = 32  # V candidates (the tiny task's 32 values)
    local: int = 0  # raw local window in tokens (0: targets never raw-visible, as in training)
    back: int = 4  # targets lie uniformly in the last `back` windows (for rho only)
    horizon: float = 6000.0  # integrate the flow over t in [0, horizon] (lr x steps of a small-step GD)
    init_scale: float = 0.01  # theta ~ N(0, init_scale^2): near-uniform weights
    readout: str = "zero"  # initial readout gain: "zero" (learns with the pooler) or "optimal" (g*(a))

    def __post_init__(self):
        if self.step < 1:
            raise InputError(f"step must be >= 1, got {self.step}")
        if self.capacity <= 0 or self.noise < 0:
            raise InputError(f"need capacity > 0 and noise >= 0, got {self.capacity}, {self.noise}")
        if self.vocab < 2:
            raise InputError(f"vocab must be >= 2, got {self.vocab}")
        if self.local < 0 or self.back < 1 or self.horizon <= 0:
            raise InputError("need local >= 0, back >= 1, horizon > 0")
        if self.readout not in ("zero", "optimal"):
            raise InputError(f"readout must be 'zero' or 'optimal', got {self.readout!r}")


def optimal_readout(a: np.ndarray, d: float, noise: float) -> np.ndarray:
    """g* = d a / N: the gain that minimises each offset's loss for fixed weights (dL/dg = 0)."""
    interference = (a * a).sum(axis=-1, keepdims=True) - a * a + noise
    return d * a / np.maximum(interference, 1e-300)


def integrate(cfg: FlowConfig, starts: int, rng: np.random.Generator, snapshots: int = 60) -> dict:
    """Run the flow from ``starts`` random near-uniform initialisations (numpy arrays out)."""
    from scipy.integrate import solve_ivp

    s = cfg.step
    rho = raw_coverage(s, cfg.local, cfg.back)
    args = (cfg.capacity, cfg.noise, cfg.vocab)
    theta = cfg.init_scale * rng.standard_normal((starts, s))
    if cfg.readout == "zero":
        g = np.zeros((starts, s))  # the readout starts knowing nothing and co-adapts
    else:
        g = optimal_readout(softmax(theta), cfg.capacity, cfg.noise)  # already adapted to near-uniform

    def velocity(_t, y):  # y = [theta (starts*s), g (starts*s)]
        d_theta, d_g = gradient(y[: starts * s].reshape(starts, s), y[starts * s :].reshape(starts, s), *args, rho)
        return -np.concatenate([d_theta.ravel(), d_g.ravel()])

    # log-spaced snapshots: the escape from uniform is early, the settling late
    times = np.concatenate([[0.0], np.geomspace(1.0, cfg.horizon, snapshots)])
    sol = solve_ivp(
        velocity,
        (0.0, cfg.horizon),
        np.concatenate([theta.ravel(), g.ravel()]),
        method="LSODA",
        t_eval=times,
        rtol=1e-7,
        atol=1e-9,
    )
    if not sol.success:
        raise RuntimeError(f"the flow integration failed: {sol.message}")
    thetas = sol.y[: starts * s].T.reshape(len(times), starts, s)
    theta, g = thetas[-1], sol.y[starts * s :, -1].reshape(starts, s)
    return {
        "rho": rho,
        "a": softmax(theta),
        "g": g,
        "quality": quality(theta, g, *args),  # (starts, s) retrieval through the entry
        "loss": loss(theta, g, *args, rho),
        "trajectory": softmax(thetas).transpose(1, 0, 2),  # (starts, snapshots+1, s)
        "times": times,
    }


def uniform_curvature(cfg: FlowConfig, h: float = 1e-4) -> float:
    """Curvature of the readout-optimised loss at uniform weights along theta = (+1, -1, 0, ...).

    At a fixed point with the readout at its optimum g* = d a / N, the joint flow is linearly
    stable iff the reduced loss L(theta, g*(theta)) curves upward (Schur complement; d2L/dg2 > 0).
    By permutation symmetry every direction orthogonal to (1, ..., 1) has the same curvature, so
    one number decides: < 0 means the uniform point is unstable and symmetry breaks. Its gradient
    is dL/dtheta at g* (envelope theorem), differenced numerically. Meaningful when rho is flat.
    """
    if cfg.step < 2:
        return float("inf")  # one offset: nothing to break (the simplex is a point)
    rho = raw_coverage(cfg.step, cfg.local, cfg.back)
    v = np.zeros(cfg.step)
    v[0], v[1] = 1.0, -1.0

    def reduced_grad(theta):
        g_opt = optimal_readout(softmax(theta), cfg.capacity, cfg.noise)
        return gradient(theta, g_opt, cfg.capacity, cfg.noise, cfg.vocab, rho)[0]

    base = np.zeros(cfg.step)
    return float(v @ (reduced_grad(base + h * v) - reduced_grad(base - h * v)) / (2 * h) / (v @ v))


def critical_capacity(cfg: FlowConfig, lo: float = 0.25, hi: float = 1024.0) -> float | None:
    """The capacity d* where uniform weights turn stable: the first sign change (- to +) of the
    curvature scanning d upward on a log grid over [lo, hi], refined by bisection in log d.
    None when uniform is never unstable on the grid (s = 1) or never stable (noise too large)."""

    def curv(d):
        return uniform_curvature(FlowConfig(**{**asdict(cfg), "capacity": float(d)}))

    grid = np.geomspace(lo, hi, 49)
    signs = [curv(d) < 0 for d in grid]
    if not signs[0]:
        return None
    first = next((i for i, neg in enumerate(signs) if not neg), None)
    if first is None:
        return None
    lo, hi = grid[first - 1], grid[first]
    for _ in range(30):
        mid = float(np.sqrt(lo * hi))
        lo, hi = (mid, hi) if curv(mid) < 0 else (lo, mid)
    return float(np.sqrt(lo * hi))
