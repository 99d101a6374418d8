"""The training loop: AdamW, warm-up + cosine, clipping, held-out evaluation, checkpoints,
exact resume, and data parallelism under torchrun (one writer: rank 0).

Shape legend: B rows of a batch (a rank's share while training), T tokens, V vocabulary,
Q queries per row, A answer tokens per query (``task.value_len``).

Every step's global batch is drawn from ``numpy.random.default_rng([seed, step])`` and each
rank takes its rows, so a run's data does not depend on how it was interrupted or on the
number of processes.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from safetensors.torch import save_model

from phasescope.data.retrieval import IGNORE, RetrievalBatch, sample_batch
from phasescope.errors import CheckpointError, InputError
from phasescope.limits import refuse_unless_fits
from phasescope.rundir import LOCK
from phasescope.rundir.files import (
    append_text,
    atomic_write_text,
    differences,
    differing_keys,
    latest_checkpoint,
    read_json,
    refuse_link,
)
from phasescope.train.checkpoint import check_optimizer_steps, checked_step, load_checkpoint, save_checkpoint
from phasescope.train.config import TrainConfig
from phasescope.train.indexer import IndexerObjective, dense_indexer
from phasescope.train.init import aligned, init_weights, random_alignment, resolve_init, write_init_record
from phasescope.train.models import build_model, hf_deepseek_v4_config, model_config_of

EVAL_SEED_OFFSET = 1_000_003  # held-out batches use seeds no training step uses


@dataclass
class Dist:
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup_distributed() -> Dist:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Dist()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    return Dist(rank=dist.get_rank(), world=dist.get_world_size())


def lr_at(cfg: TrainConfig, step: int) -> float:
    """Linear warm-up, then cosine decay to min_lr_ratio * lr."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(cfg.steps - cfg.warmup_steps, 1)
    floor = cfg.min_lr_ratio
    return cfg.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


def make_optimizer(cfg: TrainConfig, model: torch.nn.Module) -> torch.optim.Optimizer:
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "position_bias" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "position_bias" not in n)]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=(0.9, 0.95))


def to_torch(batch: RetrievalBatch, rows: slice) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch's ``rows`` as (input_ids [B,T], targets [B,T])."""
    return torch.from_numpy(batch.input_ids[rows]), torch.from_numpy(batch.targets[rows])


def batch_loss(model, input_ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """input_ids, targets [B,T] -> mean cross-entropy over the answer tokens (logits [B,T,V])."""
    logits = model(input_ids)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE)


@torch.no_grad()
def evaluate(cfg: TrainConfig, model, n_batches: int) -> dict:
    """Held-out loss and retrieval accuracy (a query counts when every value token is right),
    plus accuracy by phase of the queried value for the scheme's step."""
    model.eval()
    losses, correct, phases = [], [], []
    for i in range(n_batches):
        batch = sample_batch(cfg.task, cfg.batch_size, np.random.default_rng([cfg.seed, EVAL_SEED_OFFSET + i]))
        ids, targets = to_torch(batch, slice(None))
        logits = model(ids)
        losses.append(F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=IGNORE))
        hit = logits.argmax(-1) == targets  # logits [B,T,V] -> [B,T]
        # answers are predicted from answer_pos-1 onward; a query is right when all its tokens are:
        # predicted_at [B,Q,A], query_ok [B,Q]
        predicted_at = torch.from_numpy(batch.answer_pos[:, :, None] - 1 + np.arange(cfg.task.value_len))
        query_ok = hit.gather(1, predicted_at.flatten(1)).view(predicted_at.shape).all(dim=-1)
        correct.append(query_ok.flatten())
        phases.append(torch.from_numpy(batch.value_pos).flatten())
    model.train()
    correct_t, phase_t = torch.cat(correct).float(), torch.cat(phases)
    step = cfg.scheme.step if cfg.scheme.compressed else 4
    by_phase = [float(correct_t[(phase_t - cfg.scheme.align) % step == p].mean()) for p in range(step)]
    return {
        "eval_loss": float(torch.stack(losses).mean()),
        "eval_accuracy": float(correct_t.mean()),
        "eval_accuracy_by_phase": by_phase,
        "phase_step": step,
    }


class Logger:
    def __init__(self, path: Path, enabled: bool):
        self.path, self.enabled = path, enabled

    def truncate_from(self, step: int) -> None:
        """Drop entries at or after ``step`` (they are recomputed after a resume), and a last
        line cut short by an interruption; any other unreadable line is an error."""
        if not (self.enabled and self.path.exists()):
            return
        lines = self.path.read_text().splitlines()
        keep = []
        for number, line in enumerate(lines, start=1):
            try:
                entry = json.loads(line)
                entry_step = entry["step"]
            except (json.JSONDecodeError, KeyError, TypeError):
                if number == len(lines):
                    break  # cut by an interruption
                raise CheckpointError(
                    f"{self.path} line {number} is not a log entry; fix or delete that line and --resume again"
                ) from None
            if isinstance(entry_step, int) and entry_step < step:
                keep.append(line)
        atomic_write_text(self.path, "".join(line + "\n" for line in keep))

    def write(self, record: dict) -> None:
        if self.enabled:
            refuse_link(self.path)
            append_text(self.path, json.dumps(record) + "\n")


RUN_FILES = (
    "train_config.json",
    "init_from.json",
    "log.jsonl",
    "checkpoints",
    "model.safetensors",
    "model_config.json",
    "hf",
)


def _check_resume_config(out: Path, cfg: TrainConfig) -> None:
    saved_path = out / "train_config.json"
    if not saved_path.exists():
        raise CheckpointError(
            f"--resume: {out} has no train_config.json, so its checkpoints cannot be checked against this config; "
            "start a new run in another --out"
        )
    saved = read_json(saved_path, "train config", "start a new run in another --out")
    current = json.loads(cfg.to_json())
    diff = differing_keys(saved, current, ignore=("threads",))
    if diff:
        raise CheckpointError(
            f"--resume with a config that differs from the checkpoint's ({differences(saved, current, diff)}); "
            f"use the same recipe and --set values, or a new --out directory"
        )


def _prepare_run_dir(out: Path, cfg: TrainConfig, resume: bool) -> Path | None:
    """Checks before anything is written; returns the checkpoint to resume from (or None).

    A run directory is only ever written by the run that created it: without --resume any
    trace of a run (config, log, checkpoints, a final model) is refused, never overwritten."""
    if out.exists() and not out.is_dir():
        raise CheckpointError(f"--out {out} is a file; pass a directory for the run")
    if not resume:
        existing = [name for name in RUN_FILES if (out / name).exists()]
        if existing:
            raise CheckpointError(
                f"{out} already holds a run ({', '.join(existing)}); pass --resume to continue it or choose another "
                "--out (nothing was overwritten)"
            )
        return None
    if not out.is_dir():
        raise CheckpointError(f"--resume: {out} does not exist, so there is nothing to resume; drop --resume")
    _check_resume_config(out, cfg)
    return latest_checkpoint(out)  # None: stopped before its first checkpoint; starts again at step 0


def train(
    cfg: TrainConfig,
    out: Path,
    resume: bool = False,
    progress: bool = True,
    stop_at: int | None = None,
    say: Callable[[str], None] = lambda _: None,
) -> dict:
    """Run (or continue) a training run; returns the last evaluation.

    ``stop_at``: checkpoint and return after this many steps in total (time-boxed jobs;
    ``--resume`` continues exactly). ``say``: where to tell what a resume starts from. An
    interruption (Ctrl-C) checkpoints the last completed step, so ``--resume`` loses nothing.
    The run directory is locked from its first write (OUT/.lock, held by rank 0): a second
    ``train`` into it is refused instead of interleaving checkpoints and log lines.
    """
    with contextlib.ExitStack() as held:  # the lock, taken before the first write (every refusal leaves nothing)
        return _train(cfg, Path(out), resume, progress, stop_at, say, held)


@contextmanager
def _training_lock(out: Path, cfg: TrainConfig, resume: bool, checkpoint: Path | None):
    """OUT/.lock for the run (rank 0; torchrun's other ranks follow it), then the directory checked
    again: another ``train`` that wrote into it between the first check and the lock is refused."""
    if int(os.environ.get("RANK", "0")) != 0:
        yield
        return
    from filelock import FileLock, Timeout

    out.mkdir(parents=True, exist_ok=True)
    lock = FileLock(out / LOCK, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise InputError(
            f"another phasescope train is writing to {out} (its lock {out / LOCK} is held); wait for it to finish "
            "or use another --out"
        ) from None
    try:
        if _prepare_run_dir(out, cfg, resume) != checkpoint:
            raise InputError(f"another phasescope train wrote into {out} meanwhile; use another --out")
        yield
    finally:
        lock.release()


def _train(cfg: TrainConfig, out: Path, resume: bool, progress: bool, stop_at: int | None, say, held) -> dict:
    ddp = setup_distributed()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    if cfg.batch_size % ddp.world:
        raise InputError(f"batch_size={cfg.batch_size} must be divisible by the number of processes ({ddp.world})")
    if cfg.arch == "hf-deepseek-v4":
        hf_deepseek_v4_config(cfg)  # refuses a scheme transformers cannot build, before anything is written
    refuse_beyond_memory(cfg)
    init_source = resolve_init(cfg.init_from, cfg.seed, cfg.arch)  # refuses a bad init_from before anything is written
    checkpoint = _prepare_run_dir(out, cfg, resume)
    if ddp.world > 1:
        dist.barrier()  # every rank has checked the directory before rank 0 writes into it
    start, compressed = 0, cfg.warm_start_steps == 0
    if checkpoint is not None:
        state = read_json(
            checkpoint / "state.json", "checkpoint state", f"delete {checkpoint} to resume from an earlier one"
        )
        compressed = state.get("compressed")  # a checkpoint at the switch step is pre-switch
        if not isinstance(compressed, bool):
            raise CheckpointError(
                f"{checkpoint / 'state.json'}: compressed is {compressed!r}, not true or false (the file was edited or "
                f"damaged); delete {checkpoint} to resume from an earlier checkpoint"
            )
        start = checked_step(checkpoint, state, cfg.steps)
    if resume:
        say(_resume_note(out, cfg, checkpoint, start))
    if stop_at is not None and stop_at <= start:
        raise InputError(f"--stop-after {stop_at}: the run is already at step {start}; it counts steps in total")
    model = build_model(cfg, compressed=compressed, seed=cfg.seed)
    optimizer = make_optimizer(cfg, model)
    record = None
    if checkpoint is None and init_source is not None:  # before anything is written: a refusal leaves nothing
        record = init_weights(model, init_source, warm_start=not compressed)
    held.enter_context(_training_lock(out, cfg, resume, checkpoint))
    if ddp.main:
        atomic_write_text(out / "train_config.json", cfg.to_json())
    logger = Logger(out / "log.jsonl", ddp.main)
    if checkpoint is not None:
        load_checkpoint(checkpoint, model, optimizer)
        switched = cfg.warm_start_steps if compressed and cfg.warm_start_steps else 0  # a new optimizer since then
        check_optimizer_steps(checkpoint, optimizer, start - switched)
    elif record is not None and ddp.main:
        write_init_record(out, record)
    logger.truncate_from(start)
    wrapped = _wrap(model, ddp)

    bar = TrainProgress(progress and ddp.main, cfg, start)
    last_eval: dict = {}
    done = Done(start, compressed, model, optimizer)
    try:
        last_eval = _loop(cfg, out, ddp, wrapped, logger, bar, done, stop_at)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(_checkpoint_on_interrupt(cfg, out, ddp, done, start)) from None
    finally:
        if bar:
            bar.close()
    if ddp.main and (stop_at is None or stop_at >= cfg.steps):
        export_model(out, cfg, done.model)
    if not last_eval:  # stopped between evaluations, or resumed a finished run
        last_eval = evaluate(cfg, done.model, cfg.eval_batches)
    return last_eval


@dataclass
class Done:
    """The last completed step: its count, whether it was compressed, and the model and optimizer
    after it (the warm-start switch builds new ones, so these stay the pre-switch pair until the
    switch step completes); ``updating`` while an optimizer step is half done (nothing is saved then)."""

    steps: int
    compressed: bool
    model: torch.nn.Module
    optimizer: object
    updating: bool = False

    def completed(self, steps: int, compressed: bool, model: torch.nn.Module, optimizer) -> None:
        self.steps, self.compressed, self.model, self.optimizer = steps, compressed, model, optimizer
        self.updating = False


def refuse_beyond_memory(cfg: TrainConfig, rows: int | None = None) -> None:
    """Before anything is written or built: weights, gradients and AdamW's two moments (float32),
    and a generous allowance for the activations of ``rows`` rows (default: the whole batch; the
    estimate times one row first)."""
    model = cfg.model_config()
    parameters = model.approx_parameters()
    rows = cfg.batch_size if rows is None else rows
    activations = rows * cfg.task.seq_len * (model.d_model + model.d_ff) * model.n_layers * 4 * 8
    refuse_unless_fits(
        f"training {cfg.name} ({parameters:,} parameters, batches of {rows} x {cfg.task.seq_len} tokens)",
        16 * parameters + activations,
        "lower --set batch_size, task.seq_len or the model's sizes (model.d_model, model.d_ff, ...)",
    )


def _resume_note(out: Path, cfg: TrainConfig, checkpoint: Path | None, start: int) -> str:
    if checkpoint is None:
        return (
            f"--resume: {out} has no checkpoint yet, so training starts again at step 0 (the run is deterministic: "
            "its log is recomputed line for line)"
        )
    return f"resuming {out} from {checkpoint} (step {start} of {cfg.steps}); log entries after it are recomputed"


def _checkpoint_on_interrupt(cfg: TrainConfig, out: Path, ddp, done: Done, start: int) -> str:
    """Save the last completed step (unless a checkpoint of it exists or an update was half done)
    and say what ``--resume`` will continue from."""
    last = latest_checkpoint(out)
    fresh = done.steps > start and (last is None or last.name != f"step-{done.steps}")
    if ddp.main and fresh and not done.updating:
        last = _checkpoint(out, done.steps, done.model, done.optimizer, done.compressed)
    if last is None:
        return f"no checkpoint was written before the interruption: --resume starts {out} again at step 0"
    step = read_json(last / "state.json", "checkpoint state", f"delete {last}").get("step")
    return f"checkpoint {last} holds step {step} of {cfg.steps}: continue with the same command and --resume"


def _loop(cfg, out, ddp, wrapped, logger, bar, done: Done, stop_at) -> dict:
    """Steps ``done.steps .. cfg.steps - 1``; ``done`` follows every completed step."""
    rows = slice(ddp.rank, None, ddp.world)
    tokens_per_step = cfg.batch_size * cfg.task.seq_len
    model, optimizer, compressed, last_eval = done.model, done.optimizer, done.compressed, {}
    objective = IndexerObjective(model.hf) if cfg.indexer_loss else None  # the indexer's own loss (#60)
    tick = time.perf_counter()
    for step in range(done.steps, cfg.steps):
        if step == cfg.warm_start_steps and not compressed:
            model, optimizer, wrapped = _switch_to_compressed(cfg, model, ddp)
            compressed = True
        for group in optimizer.param_groups:
            group["lr"] = lr_at(cfg, step)
        batch = sample_batch(cfg.task, cfg.batch_size, np.random.default_rng([cfg.seed, step]))
        indexer_kl = None
        with training_alignment(cfg, model, step, compressed), indexer_stage(cfg, model, step):
            loss = batch_loss(wrapped, *to_torch(batch, rows))
            if objective is not None:
                indexer_kl = objective.loss()
        total = loss if indexer_kl is None else loss + cfg.indexer_loss * indexer_kl
        optimizer.zero_grad(set_to_none=True)
        total.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        loss_value = _mean_over_ranks(loss.detach(), ddp)
        _check_finite(loss_value, float(grad_norm), step, out)  # before the step: the weights stay good
        done.updating = True
        optimizer.step()
        finished = step + 1
        elapsed, tick = time.perf_counter() - tick, time.perf_counter()
        record = {
            "step": step,
            "loss": loss_value,
            "lr": lr_at(cfg, step),
            "grad_norm": float(grad_norm),
            "tokens_per_s": tokens_per_step / max(elapsed, 1e-9),
            "compressed": compressed,
        }
        if indexer_kl is not None:
            record["indexer_kl"] = _mean_over_ranks(indexer_kl.detach(), ddp)
        if finished % cfg.eval_every == 0 or finished == cfg.steps:
            last_eval = evaluate(cfg, model, cfg.eval_batches)
            record.update(last_eval)
        logger.write(record)
        stopping = finished == stop_at
        if ddp.main and (finished % cfg.checkpoint_every == 0 or finished == cfg.steps or stopping):
            _checkpoint(out, finished, model, optimizer, compressed)
        done.completed(finished, compressed, model, optimizer)
        if bar:
            bar.update(loss_value, record["tokens_per_s"], last_eval.get("eval_accuracy"))
        tick = time.perf_counter()
        if stopping:
            break
    return last_eval


def _checkpoint(out: Path, step: int, model, optimizer, compressed: bool) -> Path:
    config = model_config_of(model)  # None for a transformers model (its checkpoints are not sweepable)
    state = {"compressed": compressed}
    return save_checkpoint(out, step, model, optimizer, state, model_config=config and config.to_dict())


def indexer_stage(cfg: TrainConfig, model, step: int):
    """The indexer keeps every entry during its dense warm-up (``indexer_dense_steps``), then its top-k."""
    if step >= cfg.indexer_dense_steps:
        return contextlib.nullcontext()
    return dense_indexer(model.hf)


def training_alignment(cfg: TrainConfig, model, step: int, compressed: bool):
    """The entry alignment of this step: random under ``random_align`` (mitigation d), else as configured."""
    if not (cfg.random_align and compressed):
        return contextlib.nullcontext()
    return aligned(model, random_alignment(cfg.seed, step, cfg.scheme.step))


def _check_finite(loss: float, grad_norm: float, step: int, out: Path) -> None:
    if math.isfinite(loss) and math.isfinite(grad_norm):
        return
    last = latest_checkpoint(out)
    kept = f"the last good checkpoint, {last}, is kept" if last else "no checkpoint was written"
    raise InputError(
        f"training diverged at step {step}: loss {loss}, gradient norm {grad_norm}; {kept}. Lower lr, raise "
        "warmup_steps or check the recipe's --set values"
    )


def _wrap(model, ddp: Dist):
    if ddp.world == 1:
        return model
    return torch.nn.parallel.DistributedDataParallel(model)


def _mean_over_ranks(value: torch.Tensor, ddp: Dist) -> float:
    if ddp.world > 1:
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        value = value / ddp.world
    return float(value)


def _switch_to_compressed(cfg: TrainConfig, full_model, ddp: Dist):
    """Warm start: same weights, compressed layers (new pooler parameters keep their init)."""
    model = build_model(cfg, compressed=True, seed=cfg.seed)
    missing, unexpected = model.load_state_dict(full_model.state_dict(), strict=False)
    if unexpected:
        raise RuntimeError(f"warm start: full-attention weights without a place in the compressed model: {unexpected}")
    return model, make_optimizer(cfg, model), _wrap(model, ddp)


def export_model(out: Path, cfg: TrainConfig, model) -> None:
    """The final model in the form the sweep loads (native) or a HF directory (hf arch)."""
    model_cfg = model_config_of(model)
    if model_cfg is not None:
        save_model(model, str(out / "model.safetensors"))
        atomic_write_text(out / "model_config.json", json.dumps(model_cfg.to_dict(), indent=2))
    else:
        from phasescope.train.hf_export import export_hf

        export_hf(out / "hf", cfg, model.hf)


class TrainProgress:
    def __init__(self, enabled: bool, cfg: TrainConfig, start: int):
        self.progress = None
        if not enabled:
            return
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.progress = Progress(
            TextColumn(f"[bold]{cfg.name}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TextColumn("loss {task.fields[loss]:.3f}  acc {task.fields[acc]}  {task.fields[tps]:.0f} tok/s"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        self.task = self.progress.add_task(
            "train", total=cfg.steps, completed=start, loss=float("nan"), acc="-", tps=0.0
        )
        self.progress.start()

    def __bool__(self) -> bool:
        return self.progress is not None

    def update(self, loss: float, tps: float, acc: float | None) -> None:
        fields = {"loss": loss, "tps": tps}
        if acc is not None:
            fields["acc"] = f"{acc:.1%}"
        self.progress.update(self.task, advance=1, **fields)

    def close(self) -> None:
        self.progress.stop()
