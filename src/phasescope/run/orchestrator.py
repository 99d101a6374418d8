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
from phasescope.run.scoring import score_items
from phasescope.runfiles import atomic_write_text, differing_keys


@dataclass
class SweepResult:
    run_dir: Path | None
    records: list[dict]
    scored: int  # records scored by this call (0: the run was already complete)


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


def check_sweep_inputs(items: list[ProbeItem], offsets: list[int], step: int, vocab_size: int | None) -> None:
    if len(set(offsets)) < 2 * step:
        raise ProbeError(
            f"offsets cover {len(set(offsets))} values, fewer than two periods of step {step}; "
            f"use at least {2 * step} offsets, e.g. --offsets 0:{max(24, 2 * step)}"
        )
    if vocab_size is not None:
        top = max(max(it.input_ids + [t for c in it.candidates.values() for t in c]) for it in items)
        if top >= vocab_size:
            raise ProbeError(
                f"the probe uses token id {top} but the model's vocabulary has {vocab_size} ids; "
                "build the probe from the model's own task or tokenizer"
            )


def read_records(path: Path) -> list[dict]:
    """Complete lines only (a line cut by a kill is dropped and rescored)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return records


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
) -> SweepResult:
    items = probe.items(offsets, samples, np.random.default_rng(seed))
    check_sweep_inputs(items, offsets, step, model.vocab_size)
    check_needle_placement(items, local, window or step)
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
    done: dict[tuple, dict] = {}
    if out is not None:
        done = _open_run_dir(out, spec, lambda: {**manifest(model, seed), "command": command})
    items.sort(key=lambda it: (it.offset, it.variant, it.content_id))
    batches = _batches(items, batch_size)
    todo = [b for b in batches if any(item_key(it) not in done for it in b)]
    scored = 0
    bar = _bar(progress, len(batches), len(batches) - len(todo))
    for batch in todo:
        results = score_items(model.logits, batch)
        fresh = [record_for(it, r, step, align, window or step) for it, r in zip(batch, results, strict=True)]
        fresh = [r for r in fresh if record_key(r) not in done]
        for r in fresh:
            done[record_key(r)] = r
        if out is not None:
            with (out / "records.jsonl").open("a") as f:  # one write per batch
                f.write("".join(json.dumps(r) + "\n" for r in fresh))
        scored += len(fresh)
        if bar:
            bar.advance(bar.task_ids[0])
    if bar:
        bar.stop()
    records = sorted(done.values(), key=record_key)
    return SweepResult(out, records, scored)


def item_key(item: ProbeItem) -> tuple:
    return (item.content_id, item.offset, item.variant)


def record_key(record: dict) -> tuple:
    """What identifies a record in a run: content, offset and variant (absent in older runs: 0)."""
    return (record["content_id"], record["offset"], record.get("variant", 0))


def _batches(items: list[ProbeItem], batch_size: int) -> list[list[ProbeItem]]:
    batches, current = [], []
    for item in items:
        if current and (len(current) == batch_size or item_key(current[0])[1:] != item_key(item)[1:]):
            batches.append(current)
            current = []
        current.append(item)
    return batches + ([current] if current else [])


def _open_run_dir(out: Path, spec: dict, make_manifest) -> dict:
    """Create or reopen a run directory; the manifest (a git call) is built only for a new run."""
    out.mkdir(parents=True, exist_ok=True)
    spec_path = out / "spec.json"
    if spec_path.exists():
        diff = differing_keys(json.loads(spec_path.read_text()), json.loads(json.dumps(spec)))
        if diff:
            raise ProbeError(f"{out} holds a different sweep (differs in {diff}); use another --out")
    else:
        spec_path.write_text(json.dumps(spec, indent=2))
        (out / "manifest.json").write_text(json.dumps(make_manifest(), indent=2))
    records = read_records(out / "records.jsonl")
    # drop a line cut by an interruption
    atomic_write_text(out / "records.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    return {record_key(r): r for r in records}


def _bar(enabled: bool, total: int, completed: int):
    if not enabled:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    bar.add_task("batches", total=total, completed=completed)
    bar.start()
    return bar
