"""The lightning indexer's own objective (issue #60 item 6): the language-model loss leaves
transformers' DeepseekV4 indexer untrained; its KL to the main attention trains it alone, over
every visible entry during the dense warm-up and over the selected ones after; a recipe with a
sparse indexer trains, logs the KL and saves its top-k."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from phasescope.data.retrieval import sample_batch
from phasescope.errors import InputError
from phasescope.train.config import apply_overrides
from phasescope.train.indexer import IndexerObjective, dense_indexer, indexer_kl
from phasescope.train.models import build_model
from phasescope.train.recipes import INDEX_TOPK, get_recipe
from phasescope.train.trainer import batch_loss, to_torch, train

RECIPE = "hf-deepseek-v4-tiny-topk16"


@pytest.fixture(scope="module")
def model_and_batch():
    cfg = get_recipe(RECIPE)
    model = build_model(cfg, compressed=True, seed=0)
    batch = to_torch(sample_batch(cfg.task, 4, np.random.default_rng(0)), slice(None))
    return model, batch


def _grads(model) -> dict[str, float]:
    return {n: float(p.grad.abs().sum()) for n, p in model.named_parameters() if p.grad is not None}


def test_the_lm_loss_leaves_the_indexer_untrained_and_its_objective_trains_it_alone(model_and_batch):
    model, batch = model_and_batch
    model.zero_grad(set_to_none=True)
    batch_loss(model, *batch).backward()
    lm = _grads(model)
    indexer = [n for n in dict(model.named_parameters()) if ".indexer." in n]
    assert len(indexer) == 12 and all(lm.get(n, 0.0) == 0.0 for n in indexer)
    assert sum(v > 0 for v in lm.values()) > 20  # everything else learns from the LM loss

    objective = IndexerObjective(model.hf)
    try:
        model.zero_grad(set_to_none=True)
        batch_loss(model, *batch)
        objective.loss().backward()
        own = {n for n, g in _grads(model).items() if g > 0}
    finally:
        objective.close()
    assert own == set(indexer)  # every indexer tensor, and nothing else


def _kl_reference(scores, weights, positions, step):
    """One query at a time, written out: the target is the attention's mass over the compressed
    entries it saw (summed over heads), the KL over those entries."""
    n_entries = scores.shape[-1]
    kls = []
    for b in range(scores.shape[0]):
        for s in range(scores.shape[1]):
            visible = int(positions[0, s] + 1) // step
            mass = weights[b, :, s, -n_entries:].sum(0)[:visible].double()
            if mass.sum() == 0:
                continue
            p = mass / mass.sum()
            keep = p > 0
            q = torch.log_softmax(scores[b, s, :visible][keep].double(), 0)
            kls.append(float((p[keep] * (p[keep].log() - q)).sum()))
    return float(np.mean(kls))


def test_the_kl_equals_a_query_by_query_reference():
    rng = torch.Generator().manual_seed(3)
    b, h, s, t, step = 2, 3, 24, 6, 4
    scores = torch.randn(b, s, t, generator=rng)
    weights = torch.rand(b, h, s, s + t, generator=rng)
    weights[..., -t:][torch.rand(b, 1, s, t, generator=rng).expand(b, h, s, t) < 0.3] = 0.0  # not selected
    positions = torch.arange(s).unsqueeze(0)
    visible = torch.arange(t) < ((positions + 1) // step).unsqueeze(-1)  # [1,S,T]
    weights[..., -t:] *= visible.unsqueeze(1)  # attention never sees a future entry
    got = float(indexer_kl(scores, weights, positions, step))
    assert got == pytest.approx(_kl_reference(scores, weights, positions, step), rel=1e-5)


def _selected_per_query(model, batch) -> torch.Tensor:
    """How many compressed entries the first CSA layer's attention saw, per query of row 0."""
    seen = {}
    attn = next(m for m in model.hf.modules() if hasattr(getattr(m, "compressor", None), "indexer"))
    hook = attn.register_forward_hook(lambda m, a, out: seen.update(weights=out[1]))
    try:
        with torch.no_grad():
            model(batch[0])
    finally:
        hook.remove()
    t = model.hf.config.compress_rates["compressed_sparse_attention"]
    n_entries = batch[0].shape[1] // t
    return (seen["weights"][0, 0, :, -n_entries:] > 0).sum(-1)


def test_the_dense_warm_up_keeps_every_visible_entry_then_the_top_k(model_and_batch):
    model, batch = model_and_batch
    visible = (torch.arange(batch[0].shape[1]) + 1) // 4
    with dense_indexer(model.hf):
        assert torch.equal(_selected_per_query(model, batch), visible)
    assert torch.equal(_selected_per_query(model, batch), visible.clamp(max=INDEX_TOPK))  # restored


def _picks_attentions_favourite(model, batch) -> float:
    """Share of the sparse queries (more than top-k entries visible) whose indexer top-k, in the
    first CSA layer, holds the entry the dense attention weighs most (summed over heads)."""
    seen = {}
    attn = next(m for m in model.hf.modules() if hasattr(getattr(m, "compressor", None), "indexer"))
    hooks = [attn.compressor.indexer.register_forward_hook(lambda m, a, out: seen.update(top=out)),
             attn.register_forward_hook(lambda m, a, out: seen.update(weights=out[1]))]  # fmt: skip
    try:
        with torch.no_grad():
            with dense_indexer(model.hf):
                model(batch[0])
            favourite = seen["weights"][..., -(batch[0].shape[1] // 4) :].sum(1).argmax(-1)  # [B,S]
            model(batch[0])
    finally:
        for hook in hooks:
            hook.remove()
    sparse = torch.arange(batch[0].shape[1]) >= 4 * (INDEX_TOPK + 1)
    return float((seen["top"] == favourite.unsqueeze(-1)).any(-1)[:, sparse].float().mean())


def test_the_objective_teaches_the_indexer_the_entries_attention_uses(model_and_batch):
    """Planted: the main attention is fixed; trained on its KL alone (dense, as in the warm-up) the
    indexer's distribution approaches it (the KL falls by more than half), and its top-k then holds
    the entry attention weighs most on (nearly) every sparse query, where at random it held it on
    about half (seen: 62% before, 100% after)."""
    _, batch = model_and_batch
    fresh = build_model(get_recipe(RECIPE), compressed=True, seed=1)
    before = _picks_attentions_favourite(fresh, batch)
    optimizer = torch.optim.Adam([p for n, p in fresh.named_parameters() if ".indexer." in n], lr=1e-2)
    objective = IndexerObjective(fresh.hf)
    kls = []
    try:
        with dense_indexer(fresh.hf):
            for _ in range(60):
                batch_loss(fresh, *batch)
                kl = objective.loss()
                optimizer.zero_grad(set_to_none=True)
                kl.backward()
                optimizer.step()
                kls.append(float(kl.detach()))
    finally:
        objective.close()
    assert kls[-1] < 0.5 * kls[0]
    assert before < 0.8 and _picks_attentions_favourite(fresh, batch) >= 0.95


def test_a_recipe_with_a_sparse_indexer_trains_logs_its_kl_and_saves_its_top_k(tmp_path):
    quick = ["steps=4", "indexer_dense_steps=2", "eval_every=4", "eval_batches=1", "batch_size=4", "threads=1"]
    cfg = apply_overrides(get_recipe(RECIPE), quick)
    train(cfg, tmp_path, progress=False)
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    kls = [r["indexer_kl"] for r in log if "indexer_kl" in r]
    assert len(kls) == 4 and all(np.isfinite(k) and k >= 0 for k in kls)
    saved = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert saved["index_topk"] == INDEX_TOPK


def test_the_indexer_settings_need_a_model_with_an_indexer():
    with pytest.raises(InputError, match="index_topk=16 is invalid.*arch=hf-deepseek-v4"):
        apply_overrides(get_recipe("tiny-s4"), ["index_topk=16"])
    with pytest.raises(InputError, match="indexer_loss"):
        apply_overrides(get_recipe(RECIPE), ["indexer_loss=-1"])
    with pytest.raises(InputError, match="warm_start_steps > 0"):  # the warm start would swap the hooked model
        apply_overrides(get_recipe(RECIPE), ["warm_start_steps=10"])
    assert get_recipe("hf-deepseek-v4-tiny").index_topk == 0  # the earlier recipes keep every entry
