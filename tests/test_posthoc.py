"""Post-hoc compression of a transformers model: the context manager restores the model, s = w = 1
mean pooling without a raw window is full attention, and the compressed attention equals a slow
loop written from the definition on the same q/k/v."""

import pytest
import torch

import phasescope
from phasescope.backends.hf import Options as HFOptions
from phasescope.errors import InputError
from phasescope.kv.posthoc import _attention, compressed_attention, parse_compress


@pytest.fixture(scope="module")
def qwen3(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    from hf_models import tiny_qwen3

    return AutoModelForCausalLM.from_pretrained(tiny_qwen3(tmp_path_factory.mktemp("q") / "m")).eval()


def test_none_leaves_the_model_exactly_as_it_is_and_exits_restore_it(qwen3):
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        plain = qwen3(ids).logits
        with compressed_attention(qwen3, parse_compress("none")):
            assert torch.equal(qwen3(ids).logits, plain)
        with pytest.raises(RuntimeError, match="inside"):
            with compressed_attention(qwen3, parse_compress("mean:s=4,w=4,L=8")):
                assert qwen3.config._attn_implementation == "phasescope_compressed"
                raise RuntimeError("inside")
        assert qwen3.config._attn_implementation == "sdpa"
        assert not any(hasattr(m, "_phasescope_scheme") for m in qwen3.modules())
        assert torch.equal(qwen3(ids).logits, plain)


def test_one_token_windows_without_a_raw_window_are_full_attention(qwen3):
    ids = torch.randint(0, 64, (2, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        plain = qwen3(ids).logits
        with compressed_attention(qwen3, parse_compress("mean:s=1,w=1,L=0")):
            torch.testing.assert_close(qwen3(ids).logits, plain, rtol=1e-5, atol=1e-5)
        with compressed_attention(qwen3, parse_compress("mean:s=4,w=4,L=8")):
            assert (qwen3(ids).logits - plain).abs().max() > 1e-3  # compression changes the answer


class Layer:
    def __init__(self, scheme):
        self._phasescope_scheme = scheme


def loop_reference(q, k, v, step, window, local, scale):
    """Per query: raw keys t-L+1..t, plus the mean of every complete window ending at or before t."""
    b, h, t, d = q.shape
    group = h // k.shape[1]
    out = torch.zeros(b, t, h, d, dtype=q.dtype)
    for head in range(h):
        kh, vh = k[:, head // group], v[:, head // group]
        for i in range(t):
            keys = [kh[:, j] for j in range(max(0, i - local + 1), i + 1)] if local else []
            values = [vh[:, j] for j in range(max(0, i - local + 1), i + 1)] if local else []
            for end in range(step - 1, i + 1, step):
                first = max(0, end - window + 1)
                keys.append(kh[:, first : end + 1].mean(1))
                values.append(vh[:, first : end + 1].mean(1))
            if not keys:  # nothing visible yet (no raw window, no complete window): zeros, as joint_attention
                continue
            weights = torch.softmax(torch.stack([(q[:, head, i] * key).sum(-1) * scale for key in keys], 1), 1)
            out[:, i, head] = (weights[:, :, None] * torch.stack(values, 1)).sum(1)
    return out


@pytest.mark.parametrize("step, window, local", [(4, 4, 8), (4, 8, 3), (2, 6, 0)])
def test_compressed_attention_equals_the_definition_on_the_same_qkv(step, window, local):
    gen = torch.Generator().manual_seed(step + window + local)
    q, k, v = (torch.randn(2, n, 19, 8, generator=gen, dtype=torch.float64) for n in (4, 2, 2))
    scheme = parse_compress(f"mean:s={step},w={window},L={local}")
    out, _ = _attention(Layer(scheme), q, k, v, None, scaling=0.3)
    torch.testing.assert_close(out, loop_reference(q, k, v, step, window, local, 0.3), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("text", ["mlp:s=4", "mean:s=4,x=1", "mean:s=four", "mean:s=4,w=2"])
def test_bad_schemes_are_refused(text):
    with pytest.raises(InputError):
        parse_compress(text)


def test_the_window_defaults_to_the_step():
    assert parse_compress("mean:s=8").window == 8 and parse_compress("mean:s=8,w=16").window == 16


def test_a_sweep_with_post_hoc_compression_records_its_geometry(tmp_path):
    from hf_models import tiny_qwen3, word_tokenizer

    model = tiny_qwen3(tmp_path / "m", word_tokenizer())
    options = HFOptions(compress="mean:s=4,w=4,L=16")
    result = phasescope.sweep(f"hf:{model}", samples=2, out=tmp_path / "run", options=options)
    assert len(result.records) == 48 and phasescope.analyze(tmp_path / "run", n_resamples=100).step == 4
    spec = (tmp_path / "run" / "spec.json").read_text()
    assert '"local": 16' in spec and "--compress mean:s=4,w=4,L=16" in spec
    with pytest.raises(
        InputError,
        match=r'different sweep \(.*sweep\.backend\.compress: "mean:s=4,w=4,L=16" in the run, "mean:s=4,w=4,L=32" now',
    ):  # not a resume
        other = HFOptions(compress="mean:s=4,w=4,L=32")
        phasescope.sweep(f"hf:{model}", samples=2, out=tmp_path / "run", options=other)
