"""Starting a run from a trained model (``init_from``), and the random-alignment training
mitigation (``random_align``).

Weight shapes (phasescope decoder; H query heads, Hk KV heads, D head_dim, C d_model)::

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
from phasescope.runfiles import read_json

ALIGN_STREAM = 7_919  # random alignments use seeds no data batch uses


def resolve_init(init_from: str, seed: int) -> Path | None:
    """The model directory ``init_from`` names: a path, or a recipe whose checkpoint for this
    seed ships with phasescope (``assets/reproduce/RECIPE-sSEED``)."""
    if not init_from:
        return None
    from phasescope.train.recipes import RECIPES

    if init_from in RECIPES:
        from phasescope.reproduce.matrix import ASSETS, Entry, checkpoint_dir

        path = checkpoint_dir(ASSETS, Entry(init_from), seed)
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


def init_weights(model: torch.nn.Module, source: Path) -> dict:
    """Copy ``source``'s weights into ``model`` (widening KV heads, see the module doc);
    returns provenance (path, sha256 of the weights, parameters left at their init)."""
    from safetensors.torch import load_file

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
    from phasescope.runfiles import atomic_write_text

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
