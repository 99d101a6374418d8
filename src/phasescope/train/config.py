"""Training configuration: one typed, validated dataclass per run; ``--set key=value`` edits it."""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import dataclass, field, fields, replace

from phasescope.data.retrieval import RetrievalTask
from phasescope.errors import InputError
from phasescope.kv.config import CompressionConfig
from phasescope.model.config import ModelConfig
from phasescope.validation import build, is_finite_number

ARCHS = ("phasescope", "hf-deepseek-v4")
NAME = re.compile(r"(?!\.{1,2}$)[A-Za-z0-9._-]+")  # a run name is one directory name, never a path


@dataclass(frozen=True)
class TrainConfig:
    """A training run. ``model.layers`` is built from ``scheme`` (compressed layers) and
    ``full_layers`` (indices kept at full attention)."""

    name: str
    model: ModelConfig
    scheme: CompressionConfig
    task: RetrievalTask = field(default_factory=RetrievalTask)
    arch: str = "phasescope"
    full_layers: tuple[int, ...] = ()
    steps: int = 2000
    batch_size: int = 32
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    # Warm start: train with full attention for this many steps, then switch to ``scheme``.
    warm_start_steps: int = 0
    # Start from a trained model instead of a random init: a model directory, or a recipe name
    # (its checkpoint for this seed shipped with phasescope). See train/init.py.
    init_from: str = ""
    # Mitigation (d): every training step draws the compressed layers' align uniformly from
    # [0, step), so no entry boundary is fixed during training; evaluation uses scheme.align.
    random_align: bool = False
    # transformers' DeepseekV4 only (issue #60 item 6): the lightning indexer keeps ``index_topk``
    # compressed entries per query (0: every entry, as the earlier recipes), so past index_topk x step
    # tokens attention is sparse. ``indexer_loss`` weighs its own objective (a KL to the main
    # attention, train/indexer.py; 0: none, and the indexer learns nothing), dense (every entry kept)
    # for the first ``indexer_dense_steps`` steps, so it learns from attention over every entry first.
    index_topk: int = 0
    indexer_loss: float = 0.0
    indexer_dense_steps: int = 0
    eval_every: int = 200
    eval_batches: int = 8
    checkpoint_every: int = 200
    seed: int = 0
    threads: int = 0  # torch threads; 0 = leave torch's default
    about: str = ""

    def __post_init__(self) -> None:
        def need(ok: bool, name: str, value, allowed: str) -> None:
            if not ok:
                raise InputError(f"train config: {name}={value!r} is invalid; allowed: {allowed}")

        need(self.arch in ARCHS, "arch", self.arch, " | ".join(ARCHS))
        for name in ("steps", "batch_size", "eval_every", "eval_batches", "checkpoint_every"):
            need(
                isinstance(getattr(self, name), int) and getattr(self, name) >= 1,
                name,
                getattr(self, name),
                ">= 1",
            )
        for name in ("warmup_steps", "warm_start_steps", "seed", "threads", "index_topk", "indexer_dense_steps"):
            need(
                isinstance(getattr(self, name), int) and getattr(self, name) >= 0,
                name,
                getattr(self, name),
                ">= 0",
            )
        need(
            self.warm_start_steps < self.steps,
            "warm_start_steps",
            self.warm_start_steps,
            f"< steps ({self.steps})",
        )
        need(self.seed < 2**63, "seed", self.seed, "< 2^63")
        need(self.threads <= 4 * (os.cpu_count() or 1), "threads", self.threads, f"<= {4 * (os.cpu_count() or 1)} here")
        need(NAME.fullmatch(self.name) is not None, "name", self.name, "letters, digits, '.', '_', '-' (no path)")
        for name in ("lr", "min_lr_ratio", "weight_decay", "grad_clip"):
            need(is_finite_number(getattr(self, name)), name, getattr(self, name), "a finite number")
        need(0 < self.lr <= 10, "lr", self.lr, "> 0 and <= 10 (a larger step diverges at once)")
        need(0 <= self.min_lr_ratio <= 1, "min_lr_ratio", self.min_lr_ratio, "[0, 1]")
        need(0 <= self.weight_decay <= 10, "weight_decay", self.weight_decay, "in [0, 10]")
        need(self.grad_clip > 0, "grad_clip", self.grad_clip, "> 0")
        n_layers = self.model.n_layers
        need(
            isinstance(self.full_layers, tuple)
            and all(isinstance(i, int) and not isinstance(i, bool) for i in self.full_layers),
            "full_layers",
            self.full_layers,
            "a list of layer indices",
        )
        for i in self.full_layers:
            need(0 <= i < n_layers, "full_layers", self.full_layers, f"indices in [0, {n_layers})")
        need(
            self.model.vocab_size >= self.task.vocab_size,
            "model.vocab_size",
            self.model.vocab_size,
            f">= the task's vocabulary ({self.task.vocab_size} ids)",
        )
        if self.scheme.stagger:
            need(
                self.model.n_kv_heads >= 2, "model.n_kv_heads", self.model.n_kv_heads, ">= 2 when scheme.stagger is on"
            )
        need(
            is_finite_number(self.indexer_loss) and 0 <= self.indexer_loss <= 100,
            "indexer_loss",
            self.indexer_loss,
            "a number in [0, 100]",
        )
        need(
            not (self.indexer_loss and self.warm_start_steps),
            "indexer_loss",
            self.indexer_loss,
            "0 with warm_start_steps > 0 (the warm start swaps the model the indexer's loss is attached to)",
        )
        if self.arch == "phasescope":
            for name in ("index_topk", "indexer_loss", "indexer_dense_steps"):
                value = getattr(self, name)
                need(not value, name, value, "0 unless arch=hf-deepseek-v4 (the model with the indexer)")
        if self.arch != "phasescope":
            need(not self.random_align, "random_align", self.random_align, "false with arch=hf-deepseek-v4")
        need(
            not self.random_align or self.scheme.compressed,
            "random_align",
            self.random_align,
            "false for a full-attention scheme (it has no entry boundaries)",
        )
        if self.scheme.compressed:
            reach = self.scheme.local
            need(
                self.task.min_distance >= reach,
                "task.min_distance",
                self.task.min_distance,
                f">= the raw local window L={reach}, so retrieval must use the compressed cache",
            )

    def model_config(self, compressed: bool = True) -> ModelConfig:
        """The decoder config; ``compressed=False`` gives the warm-start (all full) model."""
        full = CompressionConfig(kind="full")
        layers = tuple(
            full if (i in self.full_layers or not compressed) else self.scheme for i in range(self.model.n_layers)
        )
        return replace(self.model, layers=layers)

    def to_dict(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["model"] = self.model.to_dict()
        data["scheme"] = self.scheme.to_dict()
        data["task"] = self.task.to_dict()
        data["full_layers"] = list(self.full_layers)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        if not isinstance(data, dict) or any(k not in data for k in ("model", "scheme", "task")):
            raise InputError("train config: needs the keys model, scheme and task (a file `phasescope train` wrote)")
        return build(
            cls,
            data,
            "train config",
            model=ModelConfig.from_dict(data["model"]),
            scheme=CompressionConfig.from_dict(data["scheme"]),
            task=RetrievalTask.from_dict(data["task"]),
            full_layers=_as_tuple(data.get("full_layers", ())),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)


def _as_tuple(value):
    return tuple(value) if isinstance(value, list) else value


def _parse_value(text: str, current):
    """Parse ``text`` to the type of ``current`` (bool, int, float, str, tuple of int)."""
    if isinstance(current, bool):
        if text.lower() in ("true", "1", "yes", "on"):
            return True
        if text.lower() in ("false", "0", "no", "off"):
            return False
        raise InputError(f"expected true or false, got {text!r}")
    if isinstance(current, int):
        return int(text)
    if isinstance(current, float):
        return float(text)
    if isinstance(current, tuple):
        return tuple(int(x) for x in text.split(",") if x.strip())
    return text


def refuse_repeated(assignments: list[str]) -> None:
    """The command line's ``--set``: a key given twice is refused (``--set steps=4 --set steps=6``
    trained 6 steps without a word); from Python a later edit replaces an earlier one."""
    given: dict[str, str] = {}
    for assignment in assignments:
        key, _, text = assignment.partition("=")
        if key.strip() in given:
            raise InputError(
                f"--set {key.strip()} is given twice ({given[key.strip()]}, then {text}): one value each; drop one"
            )
        given[key.strip()] = text


def apply_overrides(cfg: TrainConfig, assignments: list[str]) -> TrainConfig:
    """Apply ``key=value`` edits together (validated once, at the end); keys: top-level fields,
    ``model.X``, ``scheme.X``, ``task.X``."""
    changes: dict[str, dict] = {"": {}, "model": {}, "scheme": {}, "task": {}}
    for assignment in assignments:
        if "=" not in assignment:
            raise InputError(f"--set {assignment!r}: expected key=value, e.g. --set steps=500")
        key, text = assignment.split("=", 1)
        section, _, name = key.strip().rpartition(".")
        if section not in changes:
            raise InputError(f"--set {key!r}: unknown section {section!r}; sections: model, scheme, task")
        target = getattr(cfg, section) if section else cfg
        known = {f.name for f in dataclasses.fields(target)} - {"layers", "model", "scheme", "task"}
        if name not in known:
            where = f" in {section}" if section else ""
            raise InputError(f"--set {key!r}: unknown key; known keys{where}: {sorted(known)}")
        try:
            changes[section][name] = _parse_value(text, getattr(target, name))
        except ValueError as err:
            raise InputError(f"--set {key}: {err}") from None
    sections = {name: replace(getattr(cfg, name), **edits) for name, edits in changes.items() if name and edits}
    return replace(cfg, **sections, **changes[""])
