"""The lightning indexer's own objective for transformers' DeepseekV4 (issue #60 item 6).

Shapes: B rows, S query positions, T compressed entries, H attention heads.

Each CSA layer's indexer scores every compressed entry for every query (``scores`` [B,S,T]) and
keeps the top ``index_topk``; attention then sees only those entries. Its output is indices, so
the language-model loss gives the indexer no gradient: trained on that loss alone it keeps its
random initialisation and, past ``index_topk`` x step tokens, picks entries at random.

DeepSeek trains it on its own objective, and so do we: the KL divergence from the main
attention's mass over the compressed entries (``attn_weights`` [B,H,S,S+T], its last T columns,
summed over heads and renormalised per query) to the softmax of the indexer's scores, over the
entries attention saw. While every entry is kept (``dense_indexer``, the warm-up) that is every
visible entry; afterwards the selected ones. The indexer's inputs are detached, so this loss
trains the indexer alone and the language-model loss trains everything else, as in DeepSeek's
recipe.
"""

from __future__ import annotations

import contextlib

import torch

from phasescope.errors import InputError

EVERY_ENTRY = 2**62  # an index_topk above any entry count: the indexer keeps every visible entry


def _csa_layers(hf_model) -> list:
    """The attention modules whose compressor carries an indexer (CSA layers)."""
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4Attention

    return [m for m in hf_model.modules() if isinstance(m, DeepseekV4Attention) and hasattr(m.compressor, "indexer")]


class IndexerObjective:
    """Hooks every CSA layer of ``hf_model``; after a forward pass, ``loss()`` is the mean over
    layers of the indexer's KL to the main attention (nats per query that sees an entry)."""

    def __init__(self, hf_model):
        self.layers = _csa_layers(hf_model)
        if not self.layers:
            raise InputError("indexer_loss needs a DeepseekV4 model with compressed sparse attention layers")
        self.seen: list[dict] = [{} for _ in self.layers]
        self.hooks = []
        for attn, seen in zip(self.layers, self.seen, strict=True):
            indexer = attn.compressor.indexer
            self.hooks += [
                indexer.register_forward_pre_hook(_detach_inputs),
                indexer.register_forward_hook(lambda m, args, out, seen=seen: seen.update(positions=args[2])),
                indexer.scorer.register_forward_hook(lambda m, args, out, seen=seen: seen.update(scores=out)),
                attn.register_forward_hook(lambda m, args, out, seen=seen: seen.update(weights=out[1])),
            ]

    def loss(self) -> torch.Tensor:
        """The mean KL over layers of the last forward pass; clears what the hooks kept."""
        per_layer = [indexer_kl(s["scores"], s["weights"], s["positions"], self.step) for s in self.seen]
        for s in self.seen:
            s.clear()
        return torch.stack(per_layer).mean()

    @property
    def step(self) -> int:
        return self.layers[0].compressor.indexer.compress_rate

    def close(self) -> None:
        for hook in self.hooks:
            hook.remove()


def _detach_inputs(module, args):
    hidden_states, q_residual, *rest = args
    return (hidden_states.detach(), q_residual.detach(), *rest)


def indexer_kl(scores: torch.Tensor, weights: torch.Tensor, positions: torch.Tensor, step: int) -> torch.Tensor:
    """KL(p || softmax(scores)) averaged over the queries that attended to at least one entry.

    scores [B,S,T] the indexer's; weights [B,H,S,K+T] the attention's (its last T columns the
    compressed entries; an entry not selected has weight exactly 0); positions [1 or B, S]."""
    n_entries = scores.shape[-1]
    if n_entries == 0:
        return scores.sum() * 0.0  # a row shorter than one window: nothing to select
    mass = weights[..., -n_entries:].detach().float().sum(dim=1)  # [B,S,T]
    total = mass.sum(dim=-1, keepdim=True)
    attended = total.squeeze(-1) > 0  # [B,S]: queries with a visible entry
    target = mass / total.clamp_min(1e-30)
    visible = torch.arange(n_entries, device=scores.device) < ((positions + 1) // step).unsqueeze(-1)
    support = visible & (target > 0)
    log_q = scores.float().masked_fill(~support, float("-inf")).log_softmax(dim=-1)
    terms = torch.where(support, target * (target.clamp_min(1e-30).log() - log_q), torch.zeros_like(target))
    per_query = terms.sum(dim=-1)[attended]
    return per_query.mean() if per_query.numel() else scores.sum() * 0.0


@contextlib.contextmanager
def dense_indexer(hf_model):
    """Every indexer keeps every visible entry while inside (the dense warm-up); restored after."""
    indexers = [attn.compressor.indexer for attn in _csa_layers(hf_model)]
    kept = [i.index_topk for i in indexers]
    for i in indexers:
        i.index_topk = EVERY_ENTRY
    try:
        yield
    finally:
        for i, k in zip(indexers, kept, strict=True):
            i.index_topk = k
