"""Starting a run from a trained model (``init_from``), and the random-alignment training
mitigation (``random_align``).

Shape legend: H query heads, Hk KV heads (Hk_src: the source model's), D head dim (head_dim),
C model width (d_model).

Weight shapes (phasescope decoder)::

    k_proj.weight, v_proj.weight   [Hk*D, C]   head-major rows: KV head j is rows j*D..(j+1)*D
    everything else                the same shape in source and target

A source with fewer KV heads (Hk_src dividing Hk) is widened the way grouped-query attention
is turned into multi-head attention: target KV head j copies source head j // (Hk / Hk_src),
so query head q (which reads KV head q // (H / Hk)) sees the same key and value as before and
the function is unchanged. Nothing else is converted: RoPE on/off and the attention scheme
may differ (they have no weights); pooler parameters the source lacks keep their init.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from phasescope.errors import InputError
from phasescope.model.config import ModelConfig
from phasescope.rundir.files import read_json

ALIGN_STREAM = 7_919  # random alignments use seeds no data batch uses


def resolve_init(init_from: str, seed: int, arch: str = "phasescope") -> Path | None:
    """The model directory ``init_from`` names: a path, or a recipe whose checkpoint for this
    seed ships with phasescope (``assets/reproduce/RECIPE-sSEED``). ``arch`` is the run's: a
    transformers run (hf-deepseek-v4) starts from a transformers directory (``hf_source``)."""
    if not init_from:
        return None
    from phasescope.train.recipes import RECIPES

    if init_from in RECIPES and RECIPES[init_from]().arch != arch:
        raise InputError(
            f"init_from={init_from!r} is a recipe of arch={RECIPES[init_from]().arch}; this run's arch is {arch}: "
            "start from a recipe (or a directory) of the same arch"
        )
    if arch != "phasescope":
        return hf_source(init_from, seed, init_from in RECIPES)
    if init_from in RECIPES:
        from phasescope.train.shipped import ASSETS, checkpoint_dir

        path = checkpoint_dir(ASSETS, init_from, seed)
        if (path / "config.json").exists():
            raise InputError(f"init_from={init_from!r} is a transformers model; init_from takes phasescope models")
        if not (path / "model.safetensors").exists():
            raise InputError(
                f"init_from={init_from!r}: phasescope ships no checkpoint of that recipe for seed {seed}; train it "
                f"(`phasescope train {init_from} --set seed={seed} --out DIR`) and pass --set init_from=DIR"
            )
        return path
    path = Path(init_from).expanduser()
    if not ((path / "model.safetensors").exists() and (path / "model_config.json").exists()):
        raise InputError(
            f"init_from={init_from!r} is neither a recipe name nor a model directory with model.safetensors and "
            "model_config.json (what `phasescope train` writes at the end of a run)"
        )
    return path


def hf_source(init_from: str, seed: int, is_recipe: bool) -> Path:
    """A transformers model directory (config.json + model.safetensors): a shipped recipe's
    checkpoint for this seed, a directory, or a training run directory holding one in hf/."""
    if is_recipe:
        from phasescope.train.shipped import ASSETS, checkpoint_dir

        path = checkpoint_dir(ASSETS, init_from, seed, hf=True)
        where = (
            f"phasescope ships no checkpoint of {init_from!r} for seed {seed}; train it and pass --set init_from=DIR"
        )
    else:
        path = Path(init_from).expanduser()
        path = path / "hf" if (path / "hf" / "config.json").exists() else path
        where = f"init_from={init_from!r} is not a transformers model directory (config.json + model.safetensors)"
    if not ((path / "config.json").exists() and (path / "model.safetensors").exists()):
        raise InputError(where)
    return path


def init_hf_weights(model: torch.nn.Module, source: Path) -> dict:
    """Copy a transformers checkpoint into the wrapped model of the same config (every weight).
    transformers renames DeepseekV4's weights when it saves them, so the checkpoint is loaded
    with from_pretrained (which maps them back) and its state dict copied."""
    from transformers import AutoModelForCausalLM

    weights_path = source / "model.safetensors"
    try:
        loaded = AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32)
    except Exception as err:  # transformers raises many error types for a foreign or truncated directory
        raise InputError(f"init_from {source}: transformers cannot load it ({str(err)[:300]})") from None
    mine, theirs = model.hf.config, loaded.config
    for key in ("compress_rates", "hidden_size", "num_hidden_layers", "head_dim", "sliding_window"):
        if getattr(mine, key, None) != getattr(theirs, key, None):
            raise InputError(
                f"init_from {source}: its {key} is {getattr(theirs, key, None)!r}, this run's is "
                f"{getattr(mine, key, None)!r}; start from a model of the same configuration"
            )
    try:
        model.hf.load_state_dict(loaded.state_dict(), strict=True)
    except RuntimeError as err:
        raise InputError(f"init_from {source}: its weights do not fit this model ({str(err)[:300]})") from None
    digest = hashlib.sha256(weights_path.read_bytes()).hexdigest()
    return {"path": str(source.resolve()), "sha256": digest, "kv_heads_widened": 1, "kept_init": []}


def init_weights(model: torch.nn.Module, source: Path, warm_start: bool = False) -> dict:
    """Copy ``source``'s weights into ``model`` (widening KV heads, see the module doc);
    returns provenance (path, sha256 of the weights, parameters left at their init).
    ``warm_start``: ``model`` is the full-attention model of a run's warm start (no compressor)."""
    from safetensors.torch import load_file

    if hasattr(model, "hf"):  # transformers' DeepseekV4 (train.models.HFCausalLM)
        return init_hf_weights(model, source)
    weights_path = source / "model.safetensors"
    src_cfg = ModelConfig.from_dict(read_json(source / "model_config.json", "model config"))
    try:
        weights = load_file(str(weights_path))
    except Exception as err:  # safetensors raises its own error types for a truncated or foreign file
        raise InputError(
            f"init_from {source}: cannot read {weights_path.name} ({err}); retrain or re-copy it"
        ) from None
    target = model.state_dict()
    unexpected = sorted(set(weights) - set(target))
    if unexpected and warm_start and any(layer.compressed for layer in src_cfg.layers):
        raise InputError(
            f"init_from {source}: it is a compressed model, but this run starts with full-attention warm-start "
            f"steps, whose model has no compressor ({unexpected[0]} has no place); start compressed with "
            "--set warm_start_steps=0, or start from a full-attention model"
        )
    if unexpected:
        raise InputError(
            f"init_from {source}: its weights {unexpected[:4]} have no place in this model (a different "
            "architecture: token-shift, layers or sink differ); start from a model of the same shape"
        )
    widen = model.cfg.n_kv_heads // src_cfg.n_kv_heads if model.cfg.n_kv_heads % src_cfg.n_kv_heads == 0 else 0
    loaded = {}
    for name, value in weights.items():
        want = target[name].shape
        if value.shape != want and widen > 1 and name.endswith(("k_proj.weight", "v_proj.weight")):
            # [Hk_src*D,C] -> [Hk_src,D,C] -> [Hk,D,C] (each source head widen times) -> [Hk*D,C]
            value = value.view(src_cfg.n_kv_heads, -1, value.shape[-1]).repeat_interleave(widen, 0).reshape(want)
        if value.shape != want:
            raise InputError(
                f"init_from {source}: {name} has shape {tuple(value.shape)}, this model needs {tuple(want)} "
                f"(source: {src_cfg.n_kv_heads} KV heads, d_model {src_cfg.d_model}, vocabulary {src_cfg.vocab_size}); "
                "KV heads can only be widened by a whole factor"
            )
        loaded[name] = value
    model.load_state_dict(loaded, strict=False)
    kept = sorted(set(target) - set(loaded) - tied_names(model))
    digest = hashlib.sha256(weights_path.read_bytes()).hexdigest()
    return {"path": str(source.resolve()), "sha256": digest, "kv_heads_widened": max(widen, 1), "kept_init": kept}


def tied_names(model: torch.nn.Module) -> set[str]:
    """State-dict names that share storage with an earlier name (saved once by safetensors)."""
    seen, tied = {}, set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        key = tensor.data_ptr()
        if key in seen:
            tied.add(name)
        seen.setdefault(key, name)
    return tied


def write_init_record(out: Path, record: dict) -> None:
    from phasescope.rundir.files import atomic_write_text

    atomic_write_text(out / "init_from.json", json.dumps(record, indent=2))


def random_alignment(seed: int, step: int, scheme_step: int) -> int:
    return int(np.random.default_rng([seed, ALIGN_STREAM, step]).integers(scheme_step))


@contextmanager
def aligned(model: torch.nn.Module, align: int):
    """Every compressed layer of a phasescope decoder uses ``align`` inside the block (its
    configured align afterwards): entry boundaries move, weights do not."""
    from phasescope.model.decoder import Attention

    layers = [m for m in model.modules() if isinstance(m, Attention) and m.scheme.compressed]
    saved = [m.scheme for m in layers]
    try:
        for m in layers:
            m.scheme = replace(m.scheme, align=align % m.scheme.step)
        yield
    finally:
        for m, scheme in zip(layers, saved, strict=True):
            m.scheme = scheme
