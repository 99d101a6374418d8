"""What a recipe would cost here, measured: build the model, run real training steps on the
recipe's own batch (fewer rows when a batch is very large, then scaled by rows), and add the
held-out evaluations the trainer runs. Time within 2x and peak memory within 2x of a real run
(tests/test_training.py::test_the_estimate_is_within_2x_of_a_real_run)."""

from __future__ import annotations

import resource
import sys
import time
from dataclasses import dataclass

import numpy as np
import torch

from phasescope.data.retrieval import sample_batch
from phasescope.train.config import TrainConfig
from phasescope.train.models import build_model
from phasescope.train.trainer import batch_loss, make_optimizer, refuse_beyond_memory, to_torch

MEASURED_TOKENS = 65_536  # the recipe's whole batch is measured up to this many tokens; above, fewer rows
WHOLE_BATCH_BUDGET_S = 10.0  # measure the whole batch only when one step of it should take less than this
TIMED_STEPS = 2  # after one warm-up step (which allocates gradients and AdamW's moments)
SLOW_STEP_S = 5.0


@dataclass
class Measured:
    rows: int
    loss: float
    step_s: float  # one optimizer step on ``rows`` rows
    forward_s: float  # one forward pass on ``rows`` rows, no gradients (the held-out evaluation)
    rss_before: int  # bytes resident before the steps
    peak: int  # peak resident bytes during them


def estimate(cfg: TrainConfig) -> dict:
    """Parameter count, measured step time and peak memory, the whole run's time here, and the
    compute in FLOPs (6 x parameters x tokens) with what that is on one H100."""
    refuse_beyond_memory(cfg, rows=1)  # the docs' promise: memory checked before any work, one row timed first
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    model = build_model(cfg, compressed=True, seed=cfg.seed)
    optimizer = make_optimizer(cfg, model)
    n_params = sum(p.numel() for p in model.parameters())
    m = _measure(cfg, model, optimizer, 1)
    rows = max(1, min(cfg.batch_size, MEASURED_TOKENS // cfg.task.seq_len))
    if rows > 1 and m.step_s * rows < WHOLE_BATCH_BUDGET_S:
        m = _measure(cfg, model, optimizer, rows)
    scale = cfg.batch_size / m.rows
    evals = cfg.steps // cfg.eval_every + 1
    flops = 6 * n_params * cfg.batch_size * cfg.task.seq_len * cfg.steps
    return {
        "params": n_params,
        "measured_rows": m.rows,
        "loss": m.loss,
        "step_s": m.step_s * scale,
        "total_s": (cfg.steps * m.step_s + evals * cfg.eval_batches * m.forward_s) * scale,
        "peak_memory_gib": (m.rss_before + (m.peak - m.rss_before) * scale) / 2**30,
        "weights_grads_adam_gib": 16 * n_params / 2**30,  # fp32 weights, gradients, two AdamW moments
        "total_flop": flops,
        "h100_s": flops / (0.4 * 989e12),  # one H100 at a realistic 40% of its 989 TFLOP/s bf16 peak
    }


def _measure(cfg: TrainConfig, model, optimizer, rows: int) -> Measured:
    ids, targets = to_torch(sample_batch(cfg.task, rows, np.random.default_rng(cfg.seed)), slice(None))
    rss_before = _rss_bytes()
    warm_up_s, loss = _timed(lambda: _train_step(cfg, model, optimizer, ids, targets))
    timed = TIMED_STEPS if warm_up_s < SLOW_STEP_S else 1  # a slow step varies little: one more is enough
    step_s = min(_timed(lambda: _train_step(cfg, model, optimizer, ids, targets))[0] for _ in range(timed))
    peak = _peak_rss_bytes()
    with torch.no_grad():
        forward_s, _ = _timed(lambda: model(ids))
    return Measured(rows, loss, step_s, forward_s, rss_before, peak)


def _train_step(cfg: TrainConfig, model, optimizer, ids: torch.Tensor, targets: torch.Tensor) -> float:
    """What the trainer does in one step (tests compare the two)."""
    loss = batch_loss(model, ids, targets)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
    optimizer.step()
    return float(loss.detach())


def _timed(fn) -> tuple[float, object]:
    """(seconds fn took, what it returned)"""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def _rss_bytes() -> int:
    """Resident memory now (Linux /proc; elsewhere the peak so far, which can only overstate)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize()
    except OSError:
        return _peak_rss_bytes()


def _peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # macOS reports bytes, Linux KiB
