"""Every registered scheme vs the slow loop reference: outputs and gradients."""

import pytest
import torch

from conftest import tiny_model
from phasescope.kv.reference import reference_attention
from schemes_matrix import SCHEME_CASES


@pytest.mark.parametrize("name", sorted(SCHEME_CASES))
@pytest.mark.parametrize("query_block", [128, 5])
def test_layer_matches_loop_reference(name, query_block):
    model = tiny_model(SCHEME_CASES[name], n_layers=1, n_heads=4, n_kv_heads=2)
    attn = model.blocks[0].attn
    attn.query_block = query_block
    torch.manual_seed(1)
    x = torch.randn(2, 19, 32, dtype=torch.float64, requires_grad=True)

    fast = attn(x, 0, None)
    slow = reference_attention(attn, x)
    torch.testing.assert_close(fast, slow, rtol=1e-9, atol=1e-10)

    weights = torch.randn_like(fast)
    params = [x] + [p for p in attn.parameters() if p.requires_grad]
    grads_fast = torch.autograd.grad((fast * weights).sum(), params, allow_unused=True)
    grads_slow = torch.autograd.grad((slow * weights).sum(), params, allow_unused=True)
    for p, gf, gs in zip(params, grads_fast, grads_slow, strict=True):
        gf = torch.zeros_like(p) if gf is None else gf  # unused parameter: zero gradient
        gs = torch.zeros_like(p) if gs is None else gs
        torch.testing.assert_close(gf, gs, rtol=1e-8, atol=1e-10, msg=f"gradient of {tuple(p.shape)}")


def test_grouped_query_heads_each_see_their_kv_head():
    """With 4 query heads on 2 KV heads and stagger, heads 0-1 and 2-3 use different aligns."""
    model = tiny_model(SCHEME_CASES["mean-s4w4-stagger-winrope"], n_layers=1, n_heads=4, n_kv_heads=2)
    attn = model.blocks[0].attn
    assert attn.scheme.head_align(0, 2) == 0 and attn.scheme.head_align(1, 2) == 2
    x = torch.randn(1, 11, 32, dtype=torch.float64)
    torch.testing.assert_close(attn(x, 0, None), reference_attention(attn, x))


def test_entry_selector_hook_restricts_the_visible_entries():
    """The top-k hook: keeping every entry changes nothing; keeping none leaves a sliding window."""
    from phasescope.kv import CompressionConfig

    chunked = tiny_model(CompressionConfig(step=4, window=4, local=3, pooler="mean"), n_layers=1, seed=9)
    sliding = tiny_model(CompressionConfig(kind="sliding", local=3), n_layers=1, seed=9)
    attn = chunked.blocks[0].attn
    x = torch.randn(2, 30, 32, dtype=torch.float64)
    plain = attn(x, 0, None)
    attn.entry_selector = lambda q, comp_k, visible: visible
    torch.testing.assert_close(attn(x, 0, None), plain)
    attn.entry_selector = lambda q, comp_k, visible: torch.zeros_like(visible)
    torch.testing.assert_close(attn(x, 0, None), sliding.blocks[0].attn(x, 0, None))


def _select_all(q, comp_k, visible):
    return torch.ones_like(visible)  # a selector that ignores causality: keeps future entries too


@pytest.mark.parametrize("name", ["channel_gate-v4-valuerope", "scalar_gate-stagger-sink", "mean-s4w8-strict-L0"])
@pytest.mark.parametrize("query_block", [128, 3])
def test_entry_selector_cannot_reveal_future_entries(name, query_block):
    """The selector only restricts: keeping everything (even entries not yet complete) equals no selector."""
    model = tiny_model(SCHEME_CASES[name], n_layers=1)
    attn = model.blocks[0].attn
    attn.query_block = query_block
    x = torch.randn(2, 23, 32, dtype=torch.float64)
    plain = attn(x, 0, None)
    attn.entry_selector = _select_all
    torch.testing.assert_close(attn(x, 0, None), plain, rtol=1e-12, atol=1e-12)


def test_changing_a_token_never_changes_earlier_logits_with_a_selector():
    model = tiny_model(SCHEME_CASES["channel_gate-v4-valuerope"], token_shift=True)
    for block in model.blocks:
        block.attn.entry_selector = _select_all
    ids = torch.randint(0, 50, (1, 23), generator=torch.Generator().manual_seed(0))
    base = model(ids)
    for t in (0, 5, 13, 22):
        changed = ids.clone()
        changed[0, t] = (changed[0, t] + 7) % 50
        torch.testing.assert_close(model(changed)[:, :t], base[:, :t], rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(SCHEME_CASES))
def test_inference_fast_path_matches_loop_reference(name):
    """Without gradients, long prefills take the split (bulk + edge) path: same numbers."""
    model = tiny_model(SCHEME_CASES[name], n_layers=1, n_heads=4, n_kv_heads=2)
    attn = model.blocks[0].attn
    attn.query_block = 6
    x = torch.randn(2, 31, 32, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, 0, None), reference_attention(attn, x), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("name", sorted(SCHEME_CASES))
@pytest.mark.parametrize(("query_block", "bulk_rows"), [(4, 16), (3, 1)])
def test_fast_path_bulk_blocks_match_loop_reference(name, query_block, bulk_rows):
    """Bulk blocks (entries every query of the block sees, one unmasked call) of several sub-blocks
    each, a last partial bulk and sub-block: same numbers as the loop reference."""
    model = tiny_model(SCHEME_CASES[name], n_layers=1, n_heads=4, n_kv_heads=2)
    attn = model.blocks[0].attn
    attn.query_block, attn.bulk_rows = query_block, bulk_rows
    x = torch.randn(2, 37, 32, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, 0, None), reference_attention(attn, x), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize(
    "name", ["scalar_gate-s4w4", "channel_gate-v4-valuerope", "mean-s4w4-stagger-winrope", "sliding-3"]
)
@pytest.mark.parametrize("chunk", [1, 5, 8])
def test_chunked_inference_prefill_matches_loop_reference(name, chunk):
    """Inference reads a long input in chunks through the layer's cache: same output."""
    model = tiny_model(SCHEME_CASES[name], n_layers=1, n_heads=4, n_kv_heads=2)
    attn = model.blocks[0].attn
    attn.prefill_chunk, attn.query_block, attn.bulk_rows = chunk, 3, 12
    x = torch.randn(2, 29, 32, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(attn(x, 0, None), reference_attention(attn, x), rtol=1e-9, atol=1e-10)


def test_fast_path_keeps_its_query_blocks_at_the_flash_kernels_efficient_size():
    """The bulk call covers >= bulk_rows rows (queries x heads per KV head) and a multiple of the block."""
    from phasescope.kv.attention import _bulk_queries

    assert _bulk_queries(block=256, bulk_rows=1024, group=1) == 1024
    assert _bulk_queries(block=256, bulk_rows=1024, group=4) == 256
    assert _bulk_queries(block=128, bulk_rows=1000, group=3) == 384


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("with_sink", [False, True])
@pytest.mark.parametrize("local", [1, 3, 16])
def test_the_decode_step_path_equals_the_masked_path(strict, with_sink, local):
    """A one-query step (``_decode_attention``: entries found by binary search, read in place with
    the raw band, one softmax with the sink) equals the general masked path, with entries that
    end at, before and after the query, a raw band shorter and longer than the cache, GQA, B = 2."""
    import phasescope.kv.attention as attention
    from phasescope.kv import KVView

    torch.manual_seed(3)
    b, h, hk, d, n_raw, raw_start, q_start = 2, 4, 2, 8, 6, 34, 39
    ends = torch.tensor([3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43])[None].expand(hk, -1)  # 39: the query's own
    kv = KVView(
        raw_k=torch.randn(b, hk, n_raw, d, dtype=torch.float64),
        raw_v=torch.randn(b, hk, n_raw, d, dtype=torch.float64),
        raw_start=raw_start,
        comp_k=torch.randn(b, hk, ends.shape[1], d, dtype=torch.float64),
        comp_v=torch.randn(b, hk, ends.shape[1], d, dtype=torch.float64),
        comp_end=ends,
    )
    q = torch.randn(b, h, 1, d, dtype=torch.float64)
    sink = torch.randn(h, dtype=torch.float64) if with_sink else None
    assert attention._is_prefix_decode(kv, local, None)
    fast = attention._decode_attention(q, q_start, kv, local, strict, sink)
    segments = attention._block_segments(kv, q_start, q_start + 1, local, strict, q, None)
    torch.testing.assert_close(fast, attention._segmented_attention(q, segments, sink), rtol=1e-12, atol=1e-12)


def test_staggered_heads_take_the_masked_path_in_a_decode_step():
    from phasescope.kv import KVView
    from phasescope.kv.attention import _is_prefix_decode

    ends = torch.tensor([[3, 7, 11], [1, 5, 9]])
    kv = KVView(raw_k=torch.zeros(1, 2, 4, 8), raw_v=torch.zeros(1, 2, 4, 8), raw_start=0, comp_end=ends)
    assert not _is_prefix_decode(kv, 4, None)
    assert not _is_prefix_decode(kv, 0, None) and not _is_prefix_decode(kv, None, None)
