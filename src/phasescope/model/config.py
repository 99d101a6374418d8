"""Decoder configuration and presets."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from phasescope.errors import InputError
from phasescope.kv.config import CompressionConfig
from phasescope.validation import build, is_finite_number


@dataclass(frozen=True)
class ModelConfig:
    """A Qwen3-style decoder. ``layers`` holds one compression scheme per layer."""

    vocab_size: int
    d_model: int = 64
    n_heads: int = 4
    n_kv_heads: int = 1
    head_dim: int = 16
    d_ff: int = 256
    layers: tuple[CompressionConfig, ...] = field(default_factory=lambda: (CompressionConfig(kind="full"),) * 2)
    rope: bool = True  # False = NoPE everywhere (compressed keys too)
    rope_theta: float = 10000.0
    token_shift: bool = False  # add a learned map of the previous token's embedding
    tie_embeddings: bool = True
    norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, value, allowed: str) -> None:
            if not ok:
                raise InputError(f"model config: {name}={value!r} is invalid; allowed: {allowed}")

        for name in ("vocab_size", "d_model", "n_heads", "n_kv_heads", "head_dim", "d_ff"):
            value = getattr(self, name)
            need(isinstance(value, int) and not isinstance(value, bool) and value >= 1, name, value, "integer >= 1")
        for name in ("rope_theta", "norm_eps"):
            value = getattr(self, name)
            need(is_finite_number(value) and value > 0, name, value, "a finite number > 0")
        need(
            self.n_heads % self.n_kv_heads == 0,
            "n_kv_heads",
            self.n_kv_heads,
            f"a divisor of n_heads ({self.n_heads})",
        )
        need(self.head_dim % 2 == 0 or not self.rope, "head_dim", self.head_dim, "even when rope=True")
        need(len(self.layers) >= 1, "layers", self.layers, "at least one layer")
        for layer in self.layers:
            need(isinstance(layer, CompressionConfig), "layers", layer, "CompressionConfig entries")

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def approx_parameters(self) -> int:
        """Parameters of the decoder, poolers included (up to a window x KV heads x head dim each)."""
        attention = self.d_model * self.head_dim * (2 * self.n_heads + 2 * self.n_kv_heads)
        per_layer = attention + 3 * self.d_model * self.d_ff
        embeddings = self.vocab_size * self.d_model * (1 if self.tie_embeddings else 2)
        poolers = sum(
            getattr(layer, "window", 0) * self.n_kv_heads * (self.head_dim + 1)
            for layer in self.layers
            if getattr(layer, "compressed", False)
        )
        return self.n_layers * per_layer + embeddings + poolers

    def to_dict(self) -> dict:
        data = asdict(self)
        data["layers"] = [layer.to_dict() for layer in self.layers]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> ModelConfig:
        layers = data.get("layers", []) if isinstance(data, dict) else []
        if not isinstance(layers, list):
            raise InputError(f"model config: layers must be a list of compression configs, got {layers!r}")
        return build(cls, data, "model config", layers=tuple(CompressionConfig.from_dict(layer) for layer in layers))

    def with_layers(self, *schemes: CompressionConfig, n_layers: int | None = None) -> ModelConfig:
        """Same model, layers set to ``schemes`` (one given: repeated ``n_layers`` times)."""
        if len(schemes) == 1:
            schemes = schemes * (n_layers or self.n_layers)
        return replace(self, layers=tuple(schemes))


def preset(name: str, vocab_size: int, scheme: CompressionConfig, **overrides) -> ModelConfig:
    """Model presets; ``scheme`` is used in every layer."""
    if name not in PRESETS:
        raise InputError(f"unknown model preset {name!r}; known: {', '.join(PRESETS)}")
    base = PRESETS[name]
    n_layers = overrides.pop("n_layers", base["n_layers"])
    kwargs = {k: v for k, v in base.items() if k != "n_layers"}
    return ModelConfig(vocab_size=vocab_size, layers=(scheme,) * n_layers, **{**kwargs, **overrides})


PRESETS: dict[str, dict] = {
    # Qwen3-0.6B: 28 layers, hidden 1024, 16 query / 8 KV heads of 128, MLP 3072, rope 1e6.
    "qwen3-0.6b": dict(
        n_layers=28,
        d_model=1024,
        n_heads=16,
        n_kv_heads=8,
        head_dim=128,
        d_ff=3072,
        rope_theta=1_000_000.0,
        token_shift=False,
        tie_embeddings=True,
    ),
    # The feasibility-study size: learns retrieval on 2 CPU cores within minutes.
    "tiny": dict(n_layers=2, d_model=64, n_heads=4, n_kv_heads=1, head_dim=16, d_ff=256, token_shift=True),
    "small": dict(n_layers=4, d_model=128, n_heads=4, n_kv_heads=2, head_dim=32, d_ff=512, token_shift=True),
}
