"""Learned position preferences of a phasescope model's compressors (issue #12 part 2).

Shape legend: B rows in a batch, T tokens, C model width, Hk KV heads, D head dim, N entries,
w window slots (slot 0 = oldest), F pooling features, m gate series (channel_gate: w / s).

For every compressed layer and KV head this reports, per window slot ``k = 0 .. w-1``
(slot 0 = the oldest token of the window):

* ``learned``: the pooler's per-offset parameters, where it has any —
  ``scalar_gate``: softmax of ``offset_logits`` (the weights of a full window);
  ``channel_gate``: ``position_bias[k, head]`` averaged over channels (a logit bias);
  ``mlp``: ``||pos_k[k]||`` (shared by all heads; a position embedding, not a weight);
  ``mean`` and ``channel_gate_nobias``: none.
* ``effective``: the pooling weight each slot actually gets on real inputs. A forward hook
  on each compressed attention layer recomputes that layer's pooling features from its input
  and the softmax weights the pooler gives every *full* window (all w slots at positions
  >= 0; partial windows at the start and padding entries of staggered heads are left out),
  averaged over a window's channels (``channel_gate``), over windows, then per input row; the
  mean over rows is reported with its std and a bootstrap 95% interval over rows. Poolers
  without softmax weights (``mlp``) have no effective weights ("not estimable", None).

Slot to phase (docs/design.md, 'Definitions': phase = (pos - align) mod s): a window ends at ``e`` with
``e ≡ a_h - 1 (mod s)`` (``a_h`` the head's align), so slot k sits at ``e - w + 1 + k`` and
has phase ``(k - w) mod s`` — ``k mod s`` when w is a multiple of s; the last slot is the
boundary phase s-1.

A transformers ``DeepseekV4ForCausalLM`` (``phasescope preferences --model hf:DIR``) gets the
same report from ``preferences_v4``: ``model_preferences`` and ``effective_preferences`` hand
any model that is not a phasescope Decoder to it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from phasescope.inspect.slot_stats import slot_phase, summarise_rows
from phasescope.kv.compressor import gather_windows
from phasescope.kv.config import PAD_END, head_entry_ends
from phasescope.kv.poolers.base import masked_softmax
from phasescope.kv.poolers.channel_gate import upcast

SOFTMAX_POOLERS = ("mean", "scalar_gate", "channel_gate", "channel_gate_nobias")


def learned_preferences(pooler) -> list[list[float]] | None:
    """Per-offset learned parameters as [Hk][w] floats, or None when the pooler has none."""
    with torch.no_grad():
        if pooler.name == "scalar_gate":
            return pooler.offset_logits.float().softmax(dim=-1).tolist()
        if pooler.name == "channel_gate" and pooler.position_bias is not None:
            return pooler.position_bias.float().mean(dim=-1).transpose(0, 1).tolist()
        if pooler.name == "mlp":
            norms = pooler.pos_k.float().norm(dim=-1).tolist()
            return [norms for _ in range(pooler.n_kv_heads)]
    return None


def slot_weights(pooler, windows: torch.Tensor, valid: torch.Tensor) -> torch.Tensor | None:
    """Softmax weight per slot, windows [B,Hk,N,w,F], valid [Hk,N,w] -> [B,Hk,N,w] (None: no weights)."""
    b = windows.shape[0]
    if pooler.name == "mean":
        w = valid.to(torch.float32)
        return (w / w.sum(-1, keepdim=True)).expand(b, *w.shape)
    if pooler.name == "scalar_gate":
        logits = pooler.offset_logits[:, None, :].expand_as(valid).float()
        return masked_softmax(logits, valid, dim=-1).expand(b, *valid.shape)
    if pooler.name in ("channel_gate", "channel_gate_nobias"):
        # the gate half of the features, the series each slot reads (as ChannelGatePooler.pool)
        _, hk, n, w, _ = windows.shape
        m, d = pooler.n_series, pooler.head_dim
        gates = windows.view(b, hk, n, w, 2, m, d)[:, :, :, :, 1]  # [B,Hk,N,w,m,D]
        gate = gates[:, :, :, torch.arange(w), pooler.slot_series]  # [B,Hk,N,w,D]
        if pooler.position_bias is not None:
            gate = gate + pooler.position_bias.permute(1, 0, 2)[:, None]
        weights = masked_softmax(upcast(gate), valid[None, :, :, :, None], dim=3)
        return weights.mean(dim=-1)
    return None


class SlotRecorder:
    """Per compressed layer: the mean slot weight of each input row, one [B,Hk,w] array (float64)
    per batch."""

    def __init__(self) -> None:
        self.rows: dict[int, list[np.ndarray]] = {}

    def hook(self, layer: int, attn):
        def record(module, args, output):
            x, start_pos = args[0], int(args[1])
            with torch.no_grad():
                _, k, v = attn.project(x)  # x [B,T,C] -> k, v [B,Hk,T,D]
                feats = attn.pooler.features(x, k, v)  # [B,Hk,T,F]
                t, hk = x.shape[1], attn.n_kv_heads
                ends = head_entry_ends(attn.scheme, start_pos, start_pos + t, hk).to(x.device)  # [Hk,N]
                full = (ends != PAD_END) & (ends - attn.scheme.window + 1 >= start_pos)
                keep = full.all(dim=0)  # [N]: entries that are full windows for every head
                if not bool(keep.any()):
                    return
                ends = ends[:, keep]
                windows, valid = gather_windows(feats, start_pos, ends, attn.scheme.window)
                weights = slot_weights(attn.pooler, windows, valid)  # [B,Hk,N,w]
                if weights is not None:
                    self.rows.setdefault(layer, []).append(weights.float().mean(dim=2).double().cpu().numpy())

        return record


@contextlib.contextmanager
def record_slot_weights(model) -> Iterator[SlotRecorder]:
    """Hooks every compressed layer of ``model`` (a Decoder); always removed on exit."""
    recorder = SlotRecorder()
    handles = []
    try:
        for i, block in enumerate(model.blocks):
            if block.attn.pooler is not None:
                handles.append(block.attn.register_forward_hook(recorder.hook(i, block.attn)))
        yield recorder
    finally:
        for handle in handles:
            handle.remove()


def effective_preferences(
    model, input_ids: torch.Tensor, batch_size: int = 16, seed: int = 0, n_resamples: int = 1000
) -> dict[int, dict]:
    """Per compressed layer: {"mean","std","ci_low","ci_high": [Hk][w]} over the rows of input_ids.
    A transformers DeepseekV4 model: its compressors (preferences_v4; indexers in model_preferences)."""
    if not hasattr(model, "blocks"):
        from phasescope.inspect.preferences_v4 import effective_preferences_v4

        return effective_preferences_v4(model, input_ids, batch_size, seed, n_resamples)[0]
    recorder_rows: dict[int, list[np.ndarray]] = {}
    with torch.no_grad(), record_slot_weights(model) as rec:
        for b0 in range(0, input_ids.shape[0], batch_size):
            model(input_ids[b0 : b0 + batch_size], logits_at=slice(-1, None))
        recorder_rows = rec.rows
    rng = np.random.default_rng(seed)
    return {layer: summarise_rows(chunks, rng, n_resamples) for layer, chunks in recorder_rows.items()}


def model_preferences(model, input_ids: torch.Tensor, seed: int = 0) -> dict:
    """preferences.json content: learned and effective slot preferences of every compressed layer
    (a phasescope Decoder, or a transformers DeepseekV4 model: preferences_v4)."""
    if not hasattr(model, "blocks"):
        from phasescope.inspect.preferences_v4 import model_preferences_v4

        return model_preferences_v4(model, input_ids, seed=seed)
    effective = effective_preferences(model, input_ids, seed=seed)
    layers = []
    for i, block in enumerate(model.blocks):
        pooler, scheme = block.attn.pooler, block.attn.scheme
        if pooler is None:
            continue
        layers.append(
            {
                "layer": i,
                "pooler": pooler.name,
                "step": scheme.step,
                "window": scheme.window,
                "align": scheme.align,
                "slot_phase": [slot_phase(k, scheme.step, scheme.window) for k in range(scheme.window)],
                "learned": learned_preferences(pooler),
                "effective": effective.get(i),
            }
        )
    return {
        "n_rows": int(input_ids.shape[0]),
        "seq_len": int(input_ids.shape[1]),
        "seed": seed,
        "note": "slot 0 = oldest token of a window; phase of slot k = (k - w) mod s; effective weights over "
        "full windows only, mean over rows with std and bootstrap 95% interval over rows",
        "layers": layers,
    }


def phase_weights(prefs: dict) -> dict[int, float] | None:
    """Mean effective weight per phase over all layers, heads and the slots of that phase."""
    sums: dict[int, list[float]] = {}
    for layer in prefs["layers"]:
        if layer["effective"] is None:
            continue
        for head in layer["effective"]["mean"]:
            for k, w in enumerate(head):
                sums.setdefault(layer["slot_phase"][k], []).append(w)
    return {p: float(np.mean(v)) for p, v in sorted(sums.items())} or None


def compare_with_run(prefs: dict, accuracy: dict[int, float], step: int | None) -> dict:
    """Spearman rank correlation of mean effective weight per phase with per-phase accuracy
    (``accuracy``: phase -> a run's accuracy, ``Metrics.phase_accuracy()``; ``step``: the run's, None: unknown)."""
    from scipy.stats import spearmanr

    from phasescope.errors import InputError

    steps = sorted({layer["step"] for layer in prefs.get("layers", [])})
    if step is not None and steps and step not in steps:
        raise InputError(
            f"--run: its phases are counted mod {step}, but the model compresses every {steps}: pass a run "
            "of this model (or swept with its step)"
        )

    by_phase = phase_weights(prefs) or {}
    phases = [p for p in sorted(by_phase) if p in accuracy]
    result = {"phases": phases, "weight": [by_phase[p] for p in phases], "accuracy": [accuracy[p] for p in phases]}
    if len(phases) < 3:
        result.update(rho=None, p_value=None, note="fewer than 3 phases with both numbers: not estimable")
        return result
    constant = len(set(result["weight"])) < 2 or len(set(result["accuracy"])) < 2
    rho, p = (np.nan, np.nan) if constant else spearmanr(result["weight"], result["accuracy"])
    ok = bool(np.isfinite(rho))
    result.update(
        rho=float(rho) if ok else None,
        p_value=float(p) if ok else None,
        note=f"descriptive only: {len(phases)} points (one per phase)"
        + ("" if ok else "; a constant series has no rank correlation (not estimable)"),
    )
    return result


def model_task(model_dir):
    """The RetrievalTask a model was trained on: a `phasescope train` directory's train_config.json,
    or for ``hf:DIR`` the task in DIR/phasescope.json (phasescope's HF export); InputError without one."""
    from phasescope.data.retrieval import RetrievalTask
    from phasescope.errors import InputError

    if str(model_dir).startswith("hf:"):
        from phasescope.rundir.files import read_json

        directory = Path(str(model_dir)[len("hf:") :])
        path = directory / "phasescope.json"
        if not path.exists():
            native = (directory / "train_config.json").exists()
            raise InputError(
                f"{directory} has no phasescope.json: hf: needs a transformers export of `phasescope train`, "
                "which carries the task in it"
                + (f"; {directory} is a phasescope model directory: give it without hf:" if native else "")
            )
        task = read_json(path, "phasescope metadata").get("task")
        if not isinstance(task, dict):
            raise InputError(
                f"{path} has no task: this needs the model's own task rows (a HF export of `phasescope train`)"
            )
        return RetrievalTask.from_dict(task)

    from phasescope.backends.native_model import read_task

    task = read_task(model_dir)
    if task is None:
        path = Path(model_dir) / "train_config.json"
        raise InputError(f"{path} is missing: this needs the model's own task rows (a `phasescope train` dir)")
    return RetrievalTask.from_dict(task)


def load_for_preferences(model: str, options=None):
    """A phasescope model directory -> its Decoder; ``hf:DIR`` -> a transformers DeepseekV4 model.
    ``options``: the backend's (``run.settings.model_options``; None: its defaults). The slot weights
    are read in float32 on the CPU, so a dtype or device off those is refused, not ignored."""
    from phasescope.errors import InputError
    from phasescope.options import drop

    if options is not None:
        moved = [
            f"--{name} {getattr(options, name)}"
            for name, kept in (("dtype", "float32"), ("device", "cpu"))
            if getattr(options, name, kept) != kept
        ]
        if moved:
            flags = ", ".join(moved)
            raise InputError(f"{flags}: preferences reads the slot weights in float32 on the CPU; {drop(flags)}")
    if not model.startswith("hf:"):
        from phasescope.model.load import load_model_dir

        return load_model_dir(model).eval()
    from phasescope.backends.hf import Options
    from phasescope.backends.hf_model import load_hf_module
    from phasescope.inspect.preferences_v4 import is_deepseek_v4

    _, hf_model = load_hf_module(model[len("hf:") :], options if isinstance(options, Options) else Options())
    if not is_deepseek_v4(hf_model):
        raise InputError(
            f"{model} is a {type(hf_model).__name__}: learned position preferences need a transformers "
            "DeepseekV4ForCausalLM (its compressors have per-slot parameters)"
        )
    return hf_model


def task_rows(model_dir, n_rows: int, seed: int) -> torch.Tensor:
    """n_rows of the model's own retrieval task (train_config.json's task) as input_ids [n_rows, T]."""
    from phasescope.data.retrieval import sample_batch

    batch = sample_batch(model_task(model_dir), n_rows, np.random.default_rng(seed))
    return torch.as_tensor(batch.input_ids, dtype=torch.long)


def format_table(prefs: dict) -> list[str]:
    """One line per layer x head: effective weight per slot (mean ± std), then the learned parameters
    (DeepseekV4 layers: position_bias and its bias-only weight on lines below, then the indexer)."""
    lines = []
    for layer in prefs["layers"]:
        eff, learned = layer["effective"], layer["learned"]
        phases = ",".join(str(p) for p in layer["slot_phase"])
        lines.append(
            f"layer {layer['layer']} ({layer['pooler']}, s={layer['step']} w={layer['window']}; slot phases {phases})"
        )
        if "learned_weight" in layer:  # DeepseekV4 (preferences_v4)
            lines.extend(_v4_lines("head 0", layer))
            if "indexer" in layer:
                lines.extend(_v4_lines("indexer", layer["indexer"]))
            continue
        n_heads = len(eff["mean"]) if eff else len(learned or [])
        for h in range(n_heads):
            cells = _cells(eff, h) if eff else "not estimable (no softmax weights)"
            extra = "" if learned is None else "   learned " + " ".join(f"{v:.3f}" for v in learned[h])
            lines.append(f"  head {h}: {cells}{extra}")
    return lines


def _cells(eff: dict, h: int) -> str:
    return "  ".join(f"{m:.3f}±{s:.3f}" for m, s in zip(eff["mean"][h], eff["std"][h], strict=True))


def _v4_lines(label: str, part: dict) -> list[str]:
    eff = part["effective"]
    return [
        f"  {label}: " + (_cells(eff, 0) if eff else "not estimable (no full window in these rows)"),
        "    position_bias, mean over channels: " + " ".join(f"{v:+.3f}" for v in part["learned"][0]),
        "    weight from position_bias alone:   " + " ".join(f"{v:.3f}" for v in part["learned_weight"][0]),
    ]


def write_figure(prefs: dict, path, comparison: dict | None = None) -> None:
    """Effective weight per slot for each layer/head (error bars: bootstrap 95% over rows);
    with ``comparison`` (compare_with_run), per-phase accuracy beside mean weight per phase.
    The drawing lives in reporting/figures.py, which report.html's preferences section shares."""
    from pathlib import Path

    from phasescope.reporting.figures import preference_weights

    preference_weights(prefs, Path(path), comparison)
