"""Whole-decoder properties for every scheme: causality, decode == parallel, cache size."""

import pytest
import torch

from conftest import tiny_model
from phasescope.kv import CompressionConfig
from schemes_matrix import SCHEME_CASES

T = 23


@pytest.mark.parametrize("name", sorted(SCHEME_CASES))
def test_changing_a_token_never_changes_earlier_logits(name):
    model = tiny_model(SCHEME_CASES[name], token_shift=True)
    ids = torch.randint(0, 50, (1, T), generator=torch.Generator().manual_seed(0))
    base = model(ids)
    for t in (0, 5, 13, T - 1):
        changed = ids.clone()
        changed[0, t] = (changed[0, t] + 7) % 50
        out = model(changed)
        torch.testing.assert_close(out[:, :t], base[:, :t], rtol=0, atol=0)
        assert not torch.allclose(out[:, t:], base[:, t:]), "the changed token must matter at and after t"


@pytest.mark.parametrize("name", sorted(SCHEME_CASES))
@pytest.mark.parametrize("prefill", [1, 6, 11])
def test_prefill_then_decode_equals_parallel_forward(name, prefill):
    model = tiny_model(SCHEME_CASES[name], token_shift=True)
    ids = torch.randint(0, 50, (2, T), generator=torch.Generator().manual_seed(1))
    parallel = model(ids)
    cache = model.new_cache()
    steps = [model(ids[:, :prefill], 0, cache)]
    for t in range(prefill, T):
        steps.append(model(ids[:, t : t + 1], t, cache))
    torch.testing.assert_close(torch.cat(steps, dim=1), parallel, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    ("name", "sizes"),
    [
        ("channel_gate-s3w6-align2", (7, 1, 2, 13, 5, 12)),
        # windows of 4 tiling: calls starting at a window boundary (8, 24, 28) pool from their own
        # tokens, without the cached pending ones
        ("scalar_gate-s4w4", (7, 1, 3, 13, 4, 12)),
    ],
)
def test_uneven_chunked_prefill_equals_parallel_forward(name, sizes):
    model = tiny_model(SCHEME_CASES[name], token_shift=True)
    ids = torch.randint(0, 50, (1, 40), generator=torch.Generator().manual_seed(2))
    cache, outs, pos = model.new_cache(), [], 0
    for size in sizes:
        outs.append(model(ids[:, pos : pos + size], pos, cache))
        pos += size
    torch.testing.assert_close(torch.cat(outs, dim=1), model(ids), rtol=1e-9, atol=1e-9)


def test_generate_greedy_matches_argmax_of_parallel_forward():
    model = tiny_model(SCHEME_CASES["scalar_gate-s4w4"], token_shift=True)
    prompt = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(3))
    generated = model.generate(prompt, max_new_tokens=10)
    seq = prompt
    for i in range(10):
        next_token = model(seq)[:, -1].argmax(-1, keepdim=True)
        assert torch.equal(next_token, generated[:, i : i + 1])
        seq = torch.cat([seq, next_token], dim=1)


def test_mean_pooling_with_step_one_and_no_local_window_is_full_attention():
    full = tiny_model(CompressionConfig(kind="full"), seed=4)
    pooled = tiny_model(CompressionConfig(step=1, window=1, local=0, pooler="mean"), seed=4)
    ids = torch.randint(0, 50, (2, T), generator=torch.Generator().manual_seed(5))
    torch.testing.assert_close(pooled(ids), full(ids), rtol=1e-10, atol=1e-10)


def _expected_layer_bytes(scheme, n, hk=2, d=8, feat=None, itemsize=8):
    """Cache bytes of one layer after n tokens, from the formula in kv/cache.py's docstring."""
    if scheme.kind == "full":
        return 2 * n * hk * d * itemsize
    raw = 2 * min(n, scheme.local) * hk * d * itemsize
    if scheme.kind == "sliding":
        return raw
    counts = [
        len([e for e in range(n) if (e - scheme.head_align(h, hk)) % scheme.step == scheme.step - 1]) for h in range(hk)
    ]
    # a shared K=V entry is stored once when its value is its key: both rotated or neither
    stored_once = scheme.pooler.startswith("channel_gate") and (scheme.rope == "none" or scheme.value_rope)
    entries = (1 if stored_once else 2) * max(counts) * hk * d * itemsize
    pending = min(n, scheme.window - 1) * hk * feat * itemsize
    return raw + entries + pending


@pytest.mark.parametrize("name", sorted(SCHEME_CASES))
def test_cache_size_after_n_tokens_matches_formula(name):
    scheme = SCHEME_CASES[name]
    model = tiny_model(scheme, n_layers=1)
    cache = model.new_cache()
    ids = torch.randint(0, 50, (1, 30), generator=torch.Generator().manual_seed(6))
    model(ids[:, :17], 0, cache)
    for t in range(17, 30):
        model(ids[:, t : t + 1], t, cache)
    pooler = model.blocks[0].attn.pooler
    feat = None
    if pooler is not None:
        feat = pooler.features(
            torch.zeros(1, 1, 32, dtype=torch.float64), *(torch.zeros(1, 2, 1, 8, dtype=torch.float64),) * 2
        ).shape[-1]
    assert cache.nbytes() == _expected_layer_bytes(scheme, 30, feat=feat)


@pytest.mark.parametrize("name", sorted(SCHEME_CASES))
def test_library_cache_formula_matches_measured_cache(name):
    from phasescope.model import cache_bytes, measured_cache_bytes

    model = tiny_model(SCHEME_CASES[name], n_layers=2)
    for n in (1, 3, 26):
        ids = torch.randint(0, 50, (1, n), generator=torch.Generator().manual_seed(n))
        assert measured_cache_bytes(model, ids) == cache_bytes(model.cfg, n, itemsize=8)


def test_growable_buffer_appends_like_cat_and_bounds_its_slack():
    from phasescope.kv.cache import Growable

    buf, reference = Growable(dim=2), None
    gen = torch.Generator().manual_seed(7)
    for size in [5, 1, 1, 70, 1, 3] + [1] * 200:
        x = torch.randn(1, 2, size, 4, generator=gen)
        reference = x if reference is None else torch.cat([reference, x], dim=2)
        assert torch.equal(buf.append(x), reference)
        assert buf.data.shape[2] <= reference.shape[2] + max(64, reference.shape[2] // 8)
    buf.keep_last(10)
    assert torch.equal(buf.view(), reference[:, :, -10:])


def test_cache_does_not_pin_prefill_sized_buffers():
    scheme = CompressionConfig(step=4, window=4, local=8, pooler="scalar_gate")
    model = tiny_model(scheme, n_layers=1)
    cache = model.new_cache()
    with torch.no_grad():
        model(torch.randint(0, 50, (1, 600)), 0, cache)
        for t in range(600, 610):
            model(torch.randint(0, 50, (1, 1)), t, cache)
    logical, allocated = cache.nbytes(), cache.allocated_nbytes()
    full_raw = 2 * 610 * 2 * 8 * 8  # what keeping all raw K and V would cost
    assert allocated <= 1.125 * logical + 4 * 65 * 2 * 8 * 8
    assert allocated < full_raw / 2


@pytest.mark.parametrize(
    "name", ["scalar_gate-s4w4", "channel_gate-s3w6-align2", "scalar_gate-stagger-sink", "sliding-3"]
)
def test_chunked_inference_prefill_then_decode_equals_parallel_forward(name):
    """Inference reads long inputs in chunks (attention through its cache, MLP by rows); a
    cache filled that way continues exactly like one filled in one piece."""
    model = tiny_model(SCHEME_CASES[name], token_shift=True)
    ids = torch.randint(0, 50, (2, T), generator=torch.Generator().manual_seed(8))
    parallel = model(ids)  # with gradients: one piece
    for block in model.blocks:
        block.attn.prefill_chunk, block.attn.query_block, block.attn.bulk_rows, block.mlp.chunk = 4, 3, 6, 5
    with torch.no_grad():
        torch.testing.assert_close(model(ids), parallel, rtol=1e-9, atol=1e-9)
        cache = model.new_cache()
        steps = [model(ids[:, :17], 0, cache)]
        for t in range(17, T):
            steps.append(model(ids[:, t : t + 1], t, cache))
    torch.testing.assert_close(torch.cat(steps, dim=1), parallel, rtol=1e-9, atol=1e-9)


def test_an_inference_prefill_longer_than_chunked_from_is_read_in_two_halves(monkeypatch):
    """Past ``chunked_from`` tokens an inference prefill is read in two chunks at least (its
    whole-input temporaries then exist for half the input: under full attention's memory from
    1K tokens on, docs/performance.md), of at most ``prefill_chunk``; the output is the same."""
    from phasescope.model.decoder import Attention

    model = tiny_model(SCHEME_CASES["scalar_gate-s4w4"], token_shift=True)
    ids = torch.randint(0, 50, (2, T), generator=torch.Generator().manual_seed(8))
    parallel = model(ids)  # with gradients: one piece
    read = []
    whole = Attention._forward_whole
    monkeypatch.setattr(Attention, "_forward_whole", lambda self, x, *a: read.append(x.shape[1]) or whole(self, x, *a))
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.chunked_from = T  # not longer: one piece
        model.blocks[0](model.embed_tokens(ids, None), 0, None)
        attn.chunked_from = T - 1
        model.blocks[0](model.embed_tokens(ids, None), 0, None)
        attn.prefill_chunk = 7
        model.blocks[0](model.embed_tokens(ids, None), 0, None)
        for block in model.blocks:
            block.attn.chunked_from = 8
        chunked = model(ids)
    assert (
        read[:1] == [T] and read[1:3] == [-(-T // 2), T // 2] and read[3 : 3 + -(-T // 7)] == [7] * (T // 7) + [T % 7]
    )
    torch.testing.assert_close(chunked, parallel, rtol=1e-9, atol=1e-9)


def test_logits_at_selected_positions_equal_those_of_all_positions():
    model = tiny_model(SCHEME_CASES["scalar_gate-s4w4"], token_shift=True)
    ids = torch.randint(0, 50, (2, T), generator=torch.Generator().manual_seed(9))
    every = model(ids)
    torch.testing.assert_close(model(ids, logits_at=slice(-1, None)), every[:, -1:], rtol=0, atol=0)
    picked = torch.tensor([0, 7, T - 1])
    torch.testing.assert_close(model(ids, logits_at=picked), every[:, picked], rtol=0, atol=0)


def test_chunked_inference_calls_forward_hooks_once():
    model = tiny_model(SCHEME_CASES["scalar_gate-s4w4"])
    calls = []
    for block in model.blocks:
        block.attn.prefill_chunk, block.mlp.chunk = 4, 5
        block.attn.register_forward_hook(lambda module, args, out: calls.append(out.shape[1]))
        block.mlp.register_forward_hook(lambda module, args, out: calls.append(out.shape[1]))
    with torch.no_grad():
        model(torch.randint(0, 50, (1, T), generator=torch.Generator().manual_seed(10)))
    assert calls == [T] * 4


@pytest.mark.parametrize("name", sorted(n for n, scheme in SCHEME_CASES.items() if scheme.compressed))
def test_entries_claimed_alike_end_alike_on_every_head(name):
    """A layer tells attention its KV heads' entries end alike (skipping the per-step check)
    only when they do: after a prefill and decode steps, across 4 KV heads."""
    from phasescope.kv.cache import LayerCache

    model = tiny_model(SCHEME_CASES[name], n_layers=1, n_heads=4, n_kv_heads=4)
    attn = model.blocks[0].attn
    cache, x = LayerCache(), torch.randn(1, T, 32, dtype=torch.float64)
    claims = []
    with torch.no_grad():
        for start, stop in [(0, 17), *((t, t + 1) for t in range(17, T))]:
            q, k, v = attn.project(x[:, start:stop])
            entries = attn._add_entries(cache, attn._features(x[:, start:stop], k, v), start, attn.rope)
            ends = entries["comp_end"]
            claims.append(entries["ends_alike"])
            if entries["ends_alike"]:
                assert bool((ends == ends[:1]).all())
    assert claims[-1] == (not SCHEME_CASES[name].stagger)
