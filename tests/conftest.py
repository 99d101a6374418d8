import torch

from phasescope.kv import CompressionConfig
from phasescope.model import Decoder, ModelConfig

torch.set_num_threads(2)


def tiny_model(scheme: CompressionConfig, *, n_layers=2, n_heads=4, n_kv_heads=2, seed=0, **kw) -> Decoder:
    """A tiny float64 decoder with random (non-trivial) weights for equivalence tests."""
    torch.manual_seed(seed)
    cfg = ModelConfig(
        vocab_size=kw.pop("vocab_size", 50),
        d_model=kw.pop("d_model", 32),
        n_heads=n_heads,
        n_kv_heads=n_kv_heads,
        head_dim=kw.pop("head_dim", 8),
        d_ff=kw.pop("d_ff", 48),
        layers=(scheme,) * n_layers,
        **kw,
    )
    model = Decoder(cfg).double()
    with torch.no_grad():  # move learned gates/sinks/biases off their neutral init
        for name, p in model.named_parameters():
            if any(key in name for key in ("offset_logits", "sink", "position_bias", "norm_weight", "pos_")):
                p.copy_(torch.randn_like(p))
    return model
