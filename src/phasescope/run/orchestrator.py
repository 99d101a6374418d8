"""The sweep: every content sample at every offset, scored in batches, appended to
``records.jsonl`` as it goes, so an interrupted run resumes without rescoring or duplicates.

Items are ordered by (offset, variant, content) and cut into fixed batches of one offset and
variant each; a
resumed run rescores only the batches with missing records, in the same composition, so
its numbers equal an uninterrupted run's.
"""

from __future__ import annotations

import json
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from phasescope.backends.base import LoadedModel
from phasescope.probes.base import Probe, ProbeError, ProbeItem, check_needle_placement
from phasescope.recordfile import read_records, record_key
from phasescope.run.prefix import score_group
from phasescope.run.scoring import score_items, single_token
from phasescope.runfiles import atomic_write_text, differing_keys, read_json


@dataclass
class SweepResult:
    run_dir: Path | None
    records: list[dict]
    scored: int  # records scored by this call (0: the run was already complete)
    plan: dict | None = None  # with dry_run: what the sweep would cost, nothing scored or written


def same_window(key_first: int, value_last: int, step: int, window: int, align: int) -> bool:
    """True when one compression entry covers the whole key and value: the first entry ending
    at or after the value's last token must start at or before the key's first token."""
    end = value_last + (align - 1 - value_last) % step
    return end - window + 1 <= key_first


def record_for(item: ProbeItem, result: dict, step: int, align: int, window: int) -> dict:
    rec = {
        "content_id": item.content_id,
        "offset": item.offset,
        "phase": (item.anchor_pos - align) % step,
        "step": step,
        "align": align,
        "anchor_pos": item.anchor_pos,
        "key_pos": item.key_pos,
        "value_pos": item.value_pos,
        "answer_pos": item.answer_pos,
        "same_window": None,
        "variant": item.variant,
        "target": item.target,
        **result,
    }
    if item.key_pos is not None and item.value_last is not None:
        rec["same_window"] = same_window(item.key_pos, item.value_last, step, window, align)
    return rec


def check_sweep_inputs(
    items: list[ProbeItem],
    offsets: list[int],
    step: int,
    vocab_size: int | None,
    align: int = 0,
    max_len: int | None = None,
) -> None:
    repeated = sorted({d for d in offsets if offsets.count(d) > 1})
    if repeated:
        raise ProbeError(f"offsets {repeated} are listed more than once; list each offset once")
    if len(set(offsets)) < 2 * step:
        raise ProbeError(
            f"offsets cover {len(set(offsets))} values, fewer than two periods of step {step}; "
            f"use at least {2 * step} offsets, e.g. --offsets 0:{max(24, 2 * step)}"
        )
    seen: dict[int, set] = {p: set() for p in range(step)}
    for item in items:
        seen[(item.anchor_pos - align) % step].add(item.offset)
    thin = {p: len(ds) for p, ds in seen.items() if len(ds) < 2}
    if thin:
        raise ProbeError(
            f"the offsets put the anchor at phase(s) {sorted(thin)} at fewer than two offsets ({thin}); every phase "
            f"needs at least two so that phase effects and periods are estimable: use consecutive offsets, e.g. "
            f"--offsets 0:{max(24, 2 * step)}"
        )
    if max_len is not None:
        longest = max(items, key=lambda it: len(it.input_ids) + max(map(len, it.candidates.values())))
        length = len(longest.input_ids) + max(map(len, longest.candidates.values()))
        if length > max_len:
            raise ProbeError(
                f"content {longest.content_id} at offset {longest.offset} needs {length} tokens but the model accepts "
                f"at most {max_len} (its max_position_embeddings); nothing is truncated: use fewer pairs, fewer "
                "offsets or a shorter prompt"
            )
    if vocab_size is not None:
        top = max(max(it.input_ids + [t for c in it.candidates.values() for t in c]) for it in items)
        if top >= vocab_size:
            raise ProbeError(
                f"the probe uses token id {top} but the model's vocabulary has {vocab_size} ids; "
                "build the probe from the model's own task or tokenizer"
            )


def manifest(model: LoadedModel, seed: int) -> dict:
    import torch

    import phasescope

    versions = {
        "phasescope": phasescope.__version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }
    try:
        import transformers

        versions["transformers"] = transformers.__version__
    except ImportError:
        pass
    try:
        sha = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
                cwd=Path(__file__).parent,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        sha = None
    return {
        "versions": versions,
        "git_sha": sha,
        "seed": seed,
        "model_fingerprint": model.fingerprint,
        "model": model.description,
    }


def run_sweep(
    model: LoadedModel,
    probe: Probe,
    *,
    offsets: list[int],
    samples: int,
    seed: int,
    step: int,
    align: int,
    window: int | None = None,
    local: int | None = None,
    batch_size: int = 16,
    out: Path | None = None,
    progress: bool = False,
    command: str | None = None,
    dry_run: bool = False,
    prefix_reuse: bool = True,
) -> SweepResult:
    items = probe.items(offsets, samples, np.random.default_rng(seed))
    check_sweep_inputs(items, offsets, step, model.vocab_size, align, model.max_len)
    check_needle_placement(items, local, window or step)
    if dry_run:
        return SweepResult(None, [], 0, plan_of(items, model, batch_size))
    spec = {
        "probe": probe.spec(),
        "offsets": offsets,
        "samples": samples,
        "seed": seed,
        "step": step,
        "align": align,
        "window": window or step,
        "local": local,
        "batch_size": batch_size,
        "model": model.description,
    }
    with RunLock(out):
        done = {}
        if out is not None:
            done = _open_run_dir(out, spec, model, items, lambda: {**manifest(model, seed), "command": command})
        reuse = prefix_reuse and model.prefix_session is not None and single_token(items)
        scored = _score_missing(model, items, done, batch_size, out, progress, step, align, window or step, reuse)
    records = sorted(done.values(), key=record_key)
    return SweepResult(out, records, scored)


def plan_of(items: list[ProbeItem], model: LoadedModel, batch_size: int) -> dict:
    """What scoring these items costs: records, forward passes or server requests, tokens."""
    single = single_token(items)
    per_candidate = [len(it.input_ids) + len(c) for it in items for c in it.candidates.values()]
    sequences = [len(it.input_ids) for it in items] if single else per_candidate
    plan = {"records": len(items)}
    if model.score is not None:  # served: one request per item with logprob_token_ids, else per candidate
        plan["requests"] = len(items) if single else len(per_candidate)
        plan["requests_without_logprob_token_ids"] = len(per_candidate)
    else:
        plan["forward_passes"] = -(-len(sequences) // batch_size)
    return plan | {"prompt_tokens": int(sum(sequences)), "longest_sequence": max(sequences)}


def _score_missing(model, items, done, batch_size, out, progress, step, align, window, reuse=False) -> int:
    """Score the batches with missing records, appending each batch to records.jsonl. With
    ``reuse`` a batch is a group of contents at every offset, scored from one shared prefix."""
    batches = _content_groups(items, batch_size) if reuse else _batches(_sorted(items), batch_size)
    todo = [b for b in batches if any(item_key(it) not in done for it in b)]
    scored = 0
    bar = _bar(progress, len(batches), len(batches) - len(todo))
    for batch in todo:
        results = score_group(model.prefix_session, batch, step, align) if reuse else None
        if results is None:
            results = _score_plain(model, batch, batch_size)
        fresh = [record_for(it, r, step, align, window) for it, r in zip(batch, results, strict=True)]
        fresh = [r for r in fresh if record_key(r) not in done]
        for r in fresh:
            done[record_key(r)] = r
        if out is not None:
            with (out / "records.jsonl").open("a") as f:  # one write per batch
                f.write("".join(json.dumps(r, allow_nan=False) + "\n" for r in fresh))
        scored += len(fresh)
        if bar:
            bar.advance(bar.task_ids[0])
    if bar:
        bar.stop()
    return scored


class RunLock:
    """An exclusive lock on a run directory (released when the process ends, even by kill -9),
    so two sweeps never append to the same records.jsonl."""

    def __init__(self, out: Path | None):
        self.out, self.lock = out, None

    def __enter__(self):
        if self.out is None:
            return self
        from filelock import FileLock, Timeout

        if self.out.exists() and not self.out.is_dir():
            raise ProbeError(f"--out {self.out} is a file; pass a directory for the run")
        self.out.mkdir(parents=True, exist_ok=True)
        self.lock = FileLock(self.out / ".lock", timeout=0)
        try:
            self.lock.acquire()
        except Timeout:
            raise ProbeError(
                f"another phasescope process is writing to {self.out} (its lock {self.out / '.lock'} is held); "
                "wait for it to finish or use another --out"
            ) from None
        return self

    def __exit__(self, *exc) -> None:
        if self.lock is not None:
            self.lock.release()


def item_key(item: ProbeItem) -> tuple:
    return (item.content_id, item.offset, item.variant)


def _score_plain(model, items: list[ProbeItem], batch_size: int) -> list[dict]:
    if model.score is not None:
        return model.score(items)
    ordered = _sorted(items)
    results = [r for batch in _batches(ordered, batch_size) for r in score_items(model.logits, batch)]
    by_key = {item_key(it): r for it, r in zip(ordered, results, strict=True)}
    return [by_key[item_key(it)] for it in items]


def _sorted(items: list[ProbeItem]) -> list[ProbeItem]:
    return sorted(items, key=lambda it: (it.offset, it.variant, it.content_id))


def _content_groups(items: list[ProbeItem], group_size: int) -> list[list[ProbeItem]]:
    """Groups of ``group_size`` contents (one variant), each with all its offsets."""
    groups: list[list[ProbeItem]] = []
    for variant in sorted({it.variant for it in items}):
        mine = [it for it in items if it.variant == variant]
        contents = sorted({it.content_id for it in mine}, key=lambda c: (type(c).__name__, c))
        for start in range(0, len(contents), group_size):
            chosen = set(contents[start : start + group_size])
            groups.append(
                sorted((it for it in mine if it.content_id in chosen), key=lambda it: (it.offset, it.content_id))
            )
    return groups


def _batches(items: list[ProbeItem], batch_size: int) -> list[list[ProbeItem]]:
    batches, current = [], []
    for item in items:
        if current and (len(current) == batch_size or item_key(current[0])[1:] != item_key(item)[1:]):
            batches.append(current)
            current = []
        current.append(item)
    return batches + ([current] if current else [])


def _open_run_dir(out: Path, spec: dict, model: LoadedModel, items: list[ProbeItem], make_manifest) -> dict:
    """Create or reopen a run directory. A reopened one must hold the same sweep (spec) of the
    same model (weights fingerprint; the path it was reached by does not matter); the manifest
    (a git call) is built only when it is missing."""
    spec = json.loads(json.dumps(spec))
    spec_path, manifest_path = out / "spec.json", out / "manifest.json"
    fix = f"delete {out} to start the sweep again, or use another --out"
    if spec_path.exists():
        diff = differing_keys(read_json(spec_path, "sweep spec", fix), spec, ignore=("model",))
        if diff:
            raise ProbeError(f"{out} holds a different sweep (differs in {diff}); use another --out")
        _check_same_model(out, model, manifest_path, fix)
    elif (out / "records.jsonl").exists():
        raise ProbeError(f"{out} holds records.jsonl but no spec.json: not a sweep this version can resume; {fix}")
    else:
        atomic_write_text(spec_path, json.dumps(spec, indent=2))
    if not manifest_path.exists():
        atomic_write_text(manifest_path, json.dumps(make_manifest(), indent=2))
    found = read_records(out / "records.jsonl")
    planned = {item_key(it) for it in items}
    for number, record in enumerate(found.records, start=1):
        if record_key(record) not in planned:
            raise ProbeError(
                f"{out / 'records.jsonl'} line {number} (content {record['content_id']!r}, offset {record['offset']}) "
                f"is not part of this sweep; {fix}"
            )
    if found.truncated_tail:  # a line cut by an interruption: drop it, it is rescored
        atomic_write_text(out / "records.jsonl", "".join(json.dumps(r) + "\n" for r in found.records))
    return {record_key(r): r for r in found.records}


def _check_same_model(out: Path, model: LoadedModel, manifest_path: Path, fix: str) -> None:
    if not manifest_path.exists():
        return
    saved = read_json(manifest_path, "sweep manifest", fix).get("model_fingerprint") or ""
    if saved and model.fingerprint and saved != model.fingerprint:
        raise ProbeError(
            f"{out} was swept with another model (weights fingerprint {saved}, now {model.fingerprint}): resuming "
            f"would mix two models' records; {fix}"
        )


def _bar(enabled: bool, total: int, completed: int):
    if not enabled:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    bar.add_task("batches", total=total, completed=completed)
    bar.start()
    return bar
