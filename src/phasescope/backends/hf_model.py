"""Loading a transformers causal LM as a backend (torch): from a local directory (``hf:DIR``,
checked and described in backends/hf.py) or in memory.

Shape legend: B rows in a batch, T tokens of a whole pass, S tokens one session call reads,
K positions whose logits are kept (``keep``), V vocabulary.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from safetensors import SafetensorError

from phasescope.backends.base import ModelInfo, check_device, load_tokenizer
from phasescope.backends.logits import LogitsBackend
from phasescope.backends.native_model import fingerprint_files
from phasescope.backends.options import BackendOptions
from phasescope.errors import InputError
from phasescope.kv.posthoc import compressed_attention, parse_compress
from phasescope.limits import refuse_unless_fits
from phasescope.options import behaviour
from phasescope.rundir.files import read_json
from phasescope.specs import ModelGeometry

V4_CHUNK = 256  # tokens per call for DeepSeek-V4 (16K tokens: 7.9 s at 256, 31 s at 2048; benchmarks/niah.py)


def load_hf_module(path: str | Path, options: BackendOptions):
    """(config, the transformers causal LM in eval mode) of a local directory; InputError if it cannot load."""
    from transformers import AutoConfig, AutoModelForCausalLM

    trust_remote_code = options.trust_remote_code
    path = Path(path)
    check_device(options.device)
    if not (path / "config.json").exists():
        raise InputError(f"hf:{path} is not a transformers model directory (no config.json)")
    if not any(path.glob("*.safetensors")):
        pickles = sorted(p.name for p in path.iterdir() if p.suffix in (".bin", ".pt", ".pth", ".ckpt"))
        raise InputError(
            f"hf:{path} has no *.safetensors weights"
            + (f" (only {', '.join(pickles)}: pickle files, which phasescope never loads)" if pickles else "")
            + "; save the model with save_pretrained(..., safe_serialization=True) or convert it to safetensors"
        )
    try:
        config = AutoConfig.from_pretrained(path, local_files_only=True, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, KeyError, RuntimeError, ImportError) as err:
        raise InputError(f"hf:{path}/config.json cannot be read ({type(err).__name__}: {err})") from None
    check_layers(config, path)
    parameters = approx_parameters(config)
    refuse_unless_fits(
        f"hf:{path}/config.json (about {parameters:,} parameters)",
        2 * parameters * torch.tensor([], dtype=getattr(torch, options.dtype)).element_size(),
        "a model this size cannot be loaded here; check config.json, or use a smaller model or --dtype bfloat16",
    )
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # a local load takes a blink; its bar would litter sweep output
    try:
        model = AutoModelForCausalLM.from_pretrained(
            path, local_files_only=True, trust_remote_code=trust_remote_code, dtype=getattr(torch, options.dtype)
        ).to(options.device)
    except (OSError, ValueError, KeyError, RuntimeError, ImportError, SafetensorError) as err:
        raise InputError(
            f"hf:{path}: transformers cannot load it as a causal LM ({type(err).__name__}: {err})"
        ) from None
    finally:
        if bar:
            hf_logging.enable_progress_bar()
    return config, model.eval()


def load_hf(path: str | Path, options: BackendOptions) -> LogitsBackend:
    path = Path(path)
    config, model = load_hf_module(path, options)
    scheme = parse_compress(options.compress)
    geometry = _declared_geometry(path, config, scheme, options.compress)
    logits = _logits_fn(model, options.device, scheme)
    check_causal(logits, config.vocab_size, f"hf:{path}")
    # a transformers cache continues exactly -- DeepSeek-V4's too (its compressor keeps the
    # partial window and the overlap series), up to top-k ties in its indexer (tests/
    # test_real_tokenizers.py); post-hoc compression has no cache and is scored whole.
    # DeepSeek-V4 in transformers masks every compressed entry for every query of a call: short
    # calls are ~4x faster there (docs/performance.md); a plain cache reads 2048 tokens a call
    chunk = V4_CHUNK if _geometry_from_config(config) else HFSession.chunk
    session = HFSession(model, options.device, chunk) if scheme is None else None
    tokenizer = _tokenizer(path, options)
    meta = _metadata(path)
    info = ModelInfo(
        vocab_size=config.vocab_size,
        geometry=geometry,
        fingerprint=fingerprint_files(sorted(path.glob("*.safetensors"))) + behaviour(options),
        task=meta.get("task"),
        description=f"hf:{path}" + ("" if scheme is None else f" --compress {options.compress}"),
        tokenizer=tokenizer,
        bos_id=getattr(tokenizer, "bos_token_id", None),
        max_len=getattr(config, "max_position_embeddings", None),
    )
    return LogitsBackend(info, logits, session, model, kept=logits)


def _metadata(path: Path) -> dict:
    """phasescope.json (written by phasescope's HF export), or {}."""
    meta_path = path / "phasescope.json"
    return read_json(meta_path, "phasescope metadata") if meta_path.exists() else {}


def _declared_geometry(path: Path, config, scheme, compress: str) -> ModelGeometry:
    """The compression the model runs with: imposed by --compress, from phasescope.json, or from
    a DeepSeek-V4 config; none for a plain transformers model."""
    own = _geometry_from_config(config)
    if scheme is not None:
        if own:
            raise InputError(
                f"hf:{path} compresses its own cache (DeepSeek-V4: s = {own['step']}, w = {own['window']}, from "
                f"config.json); --compress {compress} would compress on top of it: drop --compress"
            )
        return ModelGeometry(scheme.step, scheme.window, scheme.align, scheme.local, "--compress")
    meta = _metadata(path).get("compression")
    if meta is not None and not isinstance(meta, dict):
        raise InputError(f"{path / 'phasescope.json'}: compression must be an object, got {meta!r}")
    if meta and own:  # phasescope.json restates the config's compression: it may add, never contradict
        clash = [k for k in ("step", "window", "align", "local") if k in meta and own.get(k) not in (None, meta[k])]
        if clash:
            said = ", ".join(f"{k} {meta[k]} in phasescope.json, {own[k]} in config.json" for k in clash)
            raise InputError(
                f"hf:{path}: phasescope.json and config.json disagree on the compression ({said}); the model "
                "computes with config.json's: fix or delete phasescope.json's compression"
            )
    geometry, source = (meta, "phasescope.json") if meta else (own, "config.json")
    if not geometry:
        return ModelGeometry()
    keys = ("step", "window", "align", "local")
    return ModelGeometry(**{k: geometry.get(k, 0 if k == "align" else None) for k in keys}, source=source)


def _tokenizer(path: Path, options: BackendOptions):
    """--tokenizer (a name or directory) when given, else the model directory's own, else None."""
    if options.tokenizer:
        return load_tokenizer(options.tokenizer)
    if (path / "tokenizer.json").exists() or (path / "tokenizer_config.json").exists():
        from transformers import AutoTokenizer

        try:
            return AutoTokenizer.from_pretrained(
                path, local_files_only=True, trust_remote_code=options.trust_remote_code
            )
        except Exception as err:  # tokenizers raises plain Exceptions for a damaged tokenizer.json
            raise InputError(
                f"hf:{path}: its tokenizer cannot be loaded ({type(err).__name__}: {str(err)[:200]}); the tokenizer "
                "files are damaged or ask for code phasescope does not run (--trust-remote-code, only for code you "
                "trust); fix them, or pass --tokenizer DIR (or deepseek-v4 / qwen3)"
            ) from None
    return None


def check_layers(config, path: Path) -> None:
    """A config that names its layer count must have at least one layer: with none the model is
    its embeddings alone, and every answer would come from them (a sweep of nothing)."""
    text = getattr(config, "text_config", config)
    for name in ("num_hidden_layers", "n_layer", "num_layers"):
        value = getattr(text, name, None)
        if value is not None:
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise InputError(
                    f"hf:{path}/config.json: {name} = {value!r}; a model needs at least one layer: check config.json"
                )
            return


def approx_parameters(config) -> int:
    """Parameters a transformers decoder config asks for (dense and MoE layers, embeddings): for
    refusing a model that cannot fit before building it."""
    config = getattr(config, "text_config", config)

    def number(*names, default=0) -> int:
        for name in names:
            value = getattr(config, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return default

    hidden = number("hidden_size", "d_model", "n_embd")
    layers = number("num_hidden_layers", "n_layer", "num_layers")
    ffn = number("intermediate_size", "ffn_dim", default=4 * hidden)
    experts = number("n_routed_experts", "num_experts", "num_local_experts")
    expert_ffn = number("moe_intermediate_size", default=ffn)
    per_layer = 4 * hidden * hidden + 3 * hidden * ffn + experts * 3 * hidden * expert_ffn
    return layers * per_layer + 2 * number("vocab_size") * hidden


class HFSession:
    """Prefix reuse (run.prefix) for a transformers model with a plain KV cache."""

    chunk = 2048  # tokens read per call

    def __init__(self, model, device: str, chunk: int | None = None):
        self.model, self.device = model, device
        self.chunk = chunk or self.chunk

    def prefill(self, ids: torch.Tensor):  # ids [B,S] -> the cache after them
        return self.advance(None, ids, 0, keep=torch.tensor([ids.shape[1] - 1]))[1]

    def extend(self, cache, ids: torch.Tensor, start: int, keep: torch.Tensor | None = None) -> torch.Tensor:
        return self.advance(cache, ids, start, keep)[0]

    def advance(self, cache, ids: torch.Tensor, start: int, keep: torch.Tensor | None = None):
        """ids [B,S] -> (logits [B,S or K,V], the cache after ``ids``); ``cache`` itself is left as
        it was. ``keep`` [K]: positions whose logits are computed (at 128K tokens x a 150K
        vocabulary the full logits would not fit in memory)."""
        cache = None if cache is None else copy.deepcopy(cache)
        wanted = torch.arange(ids.shape[1]) if keep is None else keep.cpu()
        kept = []
        # in chunks: transformers' CPU attention with a cache materialises [heads, new, cached]
        # scores, 34 GB for 64K new tokens after 64K cached ones; a chunk keeps it to ~1 GB
        for c0 in range(0, ids.shape[1], self.chunk):
            c1 = min(ids.shape[1], c0 + self.chunk)
            mine = wanted[(wanted >= c0) & (wanted < c1)] - c0
            rows = mine if len(mine) else torch.tensor([c1 - c0 - 1])  # a chunk must return some logits
            with torch.no_grad():
                out = self.model(
                    input_ids=ids[:, c0:c1].to(self.device), cache=cache, use_cache=True, logits_to_keep=rows
                )
            cache = out.cache
            if len(mine):
                kept.append(out.logits.float().cpu())
        return torch.cat(kept, dim=1), cache


def _logits_fn(model, device: str, scheme=None):
    """input_ids [B,T] -> float32 logits [B,T,V] on the CPU, with post-hoc compression when given."""

    def logits(ids: torch.Tensor, keep: torch.Tensor | int = 0) -> torch.Tensor:
        """ids [B,T] -> logits [B,T,V]; ``keep``: transformers' logits_to_keep (0: every position;
        positions [K]: the output head only there, logits [B,K,V])."""
        with torch.no_grad(), compressed_attention(model, scheme):
            kept = keep.to(device) if isinstance(keep, torch.Tensor) else keep
            return model(input_ids=ids.to(device), use_cache=False, logits_to_keep=kept).logits.float().cpu()

    return logits


def from_pretrained_model(model, options: BackendOptions) -> LogitsBackend:
    """An in-memory transformers causal LM (Python API): geometry from its config, no tokenizer."""
    if options.compress != "none":
        raise InputError(
            f"compress={options.compress!r} applies to a model loaded from its directory (model='hf:DIR'); an "
            "in-memory model runs as it is"
        )
    model = model.eval().to(options.device)
    logits = _logits_fn(model, options.device)
    config = model.config
    check_causal(logits, config.vocab_size, type(model).__name__)
    own = _geometry_from_config(config)
    geometry = ModelGeometry(own["step"], own["window"], 0, own["local"], "config") if own else ModelGeometry()
    info = ModelInfo(
        vocab_size=config.vocab_size,
        geometry=geometry,
        description=f"in-memory {type(model).__name__}",
        max_len=getattr(config, "max_position_embeddings", None),
    )
    return LogitsBackend(info, logits, module=model, kept=logits)


def check_causal(logits_fn, vocab_size: int, name: str) -> None:
    """Refuse a model whose earlier logits depend on later tokens (bidirectional attention,
    e.g. BERT loaded through AutoModelForCausalLM): phasescope scores left-to-right models."""
    ids = torch.randint(0, vocab_size, (1, 12), generator=torch.Generator().manual_seed(0))
    changed = ids.clone()
    changed[0, -1] = (ids[0, -1] + 1) % vocab_size
    with torch.no_grad():
        before, after = logits_fn(ids)[0, :-1], logits_fn(changed)[0, :-1]
    if not (torch.isfinite(before).all() and torch.isfinite(after).all()):
        raise InputError(
            f"{name} gives NaN or infinite logits on a short test input: its weights or config are broken (e.g. a "
            "NaN or zero rms_norm_eps / layer_norm_eps, or NaN weights); fix config.json or the weights"
        )
    if not torch.allclose(before, after, atol=1e-4, rtol=1e-4):
        raise InputError(
            f"{name} is not a causal language model: changing the last token changed the logits of earlier ones "
            "(bidirectional attention, as in BERT); phasescope scores left-to-right models"
        )


def _geometry_from_config(config) -> dict:
    """DeepSeek-V4: CSA step m with the overlapping window 2m (else HCA's step, w = step),
    ``sliding_window`` as the raw window L; the legacy list ``compress_ratios`` (one per layer,
    0 = uncompressed) gives the smallest non-zero ratio."""
    rates = getattr(config, "compress_rates", None) or {}
    local = getattr(config, "sliding_window", None)
    if rates.get("compressed_sparse_attention"):
        step = rates["compressed_sparse_attention"]
        return {"step": step, "window": 2 * step, "align": 0, "local": local}
    if rates.get("heavily_compressed_attention"):
        step = rates["heavily_compressed_attention"]
        return {"step": step, "window": step, "align": 0, "local": local}
    legacy = [r for r in (getattr(config, "compress_ratios", None) or []) if r]
    if legacy:
        return {"step": min(legacy), "window": 2 * min(legacy), "align": 0, "local": local}
    return {}
