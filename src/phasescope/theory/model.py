"""The loss of one capacity-limited compressed entry and its exact gradient (numpy).

A window holds ``s`` tokens ``x_0 .. x_{s-1}``, each one of ``V`` random vectors in ``R^d``
(entries ~ N(0, 1/d), so |x|^2 ~ 1 and two different vectors have inner product ~ N(0, 1/d)).
The compressor stores one entry ``c = sum_j a_j x_j + sigma * eps`` with ``a = softmax(theta)``
(the scalar-gate pooler) and ``eps ~ N(0, I/d)``. A query asks for the token at offset ``j``
(uniform over offsets); the readout scores every candidate ``v`` by ``g_j <x_v, c>`` (a learned
gain per offset: the readout co-adapts) and the loss is the cross-entropy of that softmax.

Mean-field approximation (Gaussian interference, log of the mean of the wrong candidates'
exponentials): the right candidate scores ``g_j a_j``, each of the ``V-1`` wrong ones scores
``~ N(0, g_j^2 N_j / d)`` with interference ``N_j = sum_{k != j} a_k^2 + sigma^2``, so

    u_j    = log(V-1) + g_j^2 N_j / (2d) - g_j a_j
    loss_j = softplus(u_j)            quality q_j = exp(-loss_j) = sigmoid(-u_j)
    L      = sum_j w_j loss_j,        w_j = (1 - rho_j) / s

``rho_j`` is the fraction of offset-``j`` targets that the raw local window serves uncompressed
(they cost nothing, so they do not train the compressor). With the readout at its optimum
``g_j* = d a_j / N_j``, ``u_j = log(V-1) - SNR_j / 2`` with ``SNR_j = d a_j^2 / N_j``: capacity
``d`` multiplies the signal-to-interference ratio, and quality is a sigmoid of it. That sigmoid is
the ingredient that can break symmetry: below its threshold a gain in one offset's SNR is worth
more than the same loss spread over the others.

Shapes: ``theta``, ``g``: (..., s) — any leading batch dims (independent starts); ``rho``: (s,).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit


def softmax(theta: np.ndarray) -> np.ndarray:
    z = np.exp(theta - theta.max(axis=-1, keepdims=True))
    return z / z.sum(axis=-1, keepdims=True)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return expit(x)  # keeps tiny tails (1e-30, not 0): the curvature of saturated losses stays signed


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def terms(theta: np.ndarray, g: np.ndarray, d: float, noise: float, vocab: int) -> dict:
    """Everything the loss and the gradient share. ``noise`` is sigma^2 (per unit token norm)."""
    a = softmax(theta)  # (..., s) pooling weights
    total = (a * a).sum(axis=-1, keepdims=True)  # (..., 1) sum_k a_k^2
    interference = total - a * a + noise  # (..., s) N_j
    u = np.log(vocab - 1) + g * g * interference / (2 * d) - g * a  # (..., s)
    return {"a": a, "N": interference, "u": u}


def loss(theta, g, d, noise, vocab, rho) -> np.ndarray:
    """Expected retrieval loss per start, shape (...)."""
    s = theta.shape[-1]
    w = (1.0 - rho) / s
    return (w * _softplus(terms(theta, g, d, noise, vocab)["u"])).sum(axis=-1)


def quality(theta, g, d, noise, vocab) -> np.ndarray:
    """Probability of the right answer per offset when retrieval goes through the entry, (..., s)."""
    return _sigmoid(-terms(theta, g, d, noise, vocab)["u"])


def gradient(theta, g, d, noise, vocab, rho) -> tuple[np.ndarray, np.ndarray]:
    """(dL/dtheta, dL/dg), derived by hand (docs/theory.md; checked against autograd in the tests).

    p_j = w_j sigmoid(u_j) is the weight of offset j's error;
    dL/dg_j   = p_j (g_j N_j / d - a_j)
    dL/da_k   = (a_k / d) (S - p_k g_k^2) - p_k g_k,   S = sum_j p_j g_j^2
                (a_k raises every other offset's interference and offset k's own signal)
    dL/dtheta = a * (dL/da - <a, dL/da>)               (softmax Jacobian)
    """
    s = theta.shape[-1]
    t = terms(theta, g, d, noise, vocab)
    a, interference = t["a"], t["N"]
    p = (1.0 - rho) / s * _sigmoid(t["u"])
    grad_g = p * (g * interference / d - a)
    big_s = (p * g * g).sum(axis=-1, keepdims=True)
    grad_a = a / d * (big_s - p * g * g) - p * g
    grad_theta = a * (grad_a - (a * grad_a).sum(axis=-1, keepdims=True))
    return grad_theta, grad_g


def raw_coverage(step: int, local: int, back: int) -> np.ndarray:
    """rho_j: fraction of offset-j targets inside the raw local window of ``local`` tokens.

    Geometry (inclusive visibility): the query sits at phase q (uniform over 0..s-1) of the block
    after the target's window, the target's window is b = 0..back-1 windows further back
    (uniform), so the distance is (s - 1 - j) + 1 + q + b*s and the target is raw-visible iff that
    distance is < local. Late offsets sit closer to the query, so they are covered more often.
    ``local = 0`` (no raw window, or probes placed beyond it as in training) gives rho = 0.
    """
    j = np.arange(step)[:, None, None]
    q = np.arange(step)[None, :, None]
    b = np.arange(back)[None, None, :]
    distance = (step - 1 - j) + 1 + q + b * step
    return (distance < local).mean(axis=(1, 2))
