"""What a recipe would cost: build the model, run one real training step on a short probe
batch, and extrapolate time and memory to the recipe's batch and schedule."""

from __future__ import annotations

import resource
import time

import numpy as np
import torch

from phasescope.data.retrieval import sample_batch
from phasescope.train.config import TrainConfig
from phasescope.train.models import build_model
from phasescope.train.trainer import batch_loss, make_optimizer

PROBE_TOKENS = 256


def estimate(cfg: TrainConfig) -> dict:
    """Parameter count, measured probe step, and linear extrapolations (a lower bound for
    time: attention's quadratic term grows faster than the token count)."""
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    model = build_model(cfg, compressed=True, seed=cfg.seed)
    optimizer = make_optimizer(cfg, model)
    n_params = sum(p.numel() for p in model.parameters())
    batch = sample_batch(cfg.task, 1, np.random.default_rng(cfg.seed))
    length = min(cfg.task.seq_len, PROBE_TOKENS)
    ids = torch.from_numpy(batch.input_ids[:, :length])
    targets = torch.from_numpy(batch.targets[:, :length])
    targets[:, -1] = ids[:, -1]  # make sure the probe has a loss term even if it cut the queries off
    start = time.perf_counter()
    loss = batch_loss(model, ids, targets)
    loss.backward()
    optimizer.step()
    probe_s = time.perf_counter() - start
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    tokens_per_step = cfg.batch_size * cfg.task.seq_len
    scale = tokens_per_step / length
    state_bytes = 16 * n_params  # fp32 weights, grads, two AdamW moments
    activation_bytes = max(rss_after - rss_before - state_bytes, 0) * scale
    flops_per_step = 6 * n_params * tokens_per_step
    return {
        "params": n_params,
        "probe_tokens": length,
        "probe_step_s": probe_s,
        "loss": float(loss.detach()),
        "step_s_here": probe_s * scale,
        "total_hours_here": probe_s * scale * cfg.steps / 3600,
        "weights_grads_adam_gib": state_bytes / 2**30,
        "activations_gib": activation_bytes / 2**30,
        "total_pflop": flops_per_step * cfg.steps / 1e15,
        # one H100 at a realistic 40% of its 989 TFLOP/s bf16 peak
        "hours_on_one_h100": flops_per_step * cfg.steps / (0.4 * 989e12) / 3600,
    }
