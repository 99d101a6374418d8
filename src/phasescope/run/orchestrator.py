"""The sweep: every content sample at every offset, scored in batches, appended to
``records.jsonl`` as it goes, so an interrupted run resumes without rescoring or duplicates.

The orchestrator only schedules, checks and resumes: the backend decides how a batch is
scored (``backends``), ``probes.base.judge`` whether an item is correct.

The probe is read as a stream of contents, twice: the first pass builds and checks every item
and keeps only its key; the second rebuilds the items from the same seed, ``batch_size``
contents at a time, and scores each chunk in fixed batches (one variant at every offset with
prefix reuse, else one offset and variant), so memory holds one chunk of prompts however long
the sweep. A resumed run rescores only the batches with missing records, in the same
composition, so its numbers equal an uninterrupted run's.
"""

from __future__ import annotations

import json
import platform
import subprocess
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from phasescope.backends.base import Backend, ScoringPlan, item_key
from phasescope.limits import PROMPT_TOKEN_BYTES, refuse_beyond_memory
from phasescope.probes.base import Probe, ProbeError, ProbeItem, check_needle_placement, judge
from phasescope.recordfile import Record, read_records
from phasescope.run.generation import grade_records
from phasescope.runfiles import atomic_write_text, differences, differing_keys, read_json, refuse_link
from phasescope.specs import SCHEMA, Geometry, RunOptions, SweepSpec, offsets_text

# what a model directory holds (phasescope's own, a training run's, transformers'): never a sweep's --out
MODEL_FILES = ("model.safetensors", "model_config.json", "train_config.json", "config.json")
TOKENS_PER_BATCH = 32768  # default batch size: about this many tokens per forward pass


@dataclass
class SweepResult:
    run_dir: Path | None
    records: list[Record]
    scored: int  # records scored by this call (0: the run was already complete)
    plan: dict | None = None  # with dry_run: what the sweep would cost, nothing scored or written
    geometry: Geometry | None = None  # what phases were counted with (step, window, align, L, its source)


def same_window(key_first: int, value_last: int, step: int, window: int, align: int) -> bool:
    """True when one compression entry covers the whole key and value: the first entry ending
    at or after the value's last token must start at or before the key's first token."""
    end = value_last + (align - 1 - value_last) % step
    return end - window + 1 <= key_first


def record_for(item: ProbeItem, result: dict, step: int, align: int, window: int) -> Record:
    """The record of a scored item: its positions and phase, the backend's log-probs, and
    whether it was answered correctly (``probes.base.judge``)."""
    together = item.key_pos is not None and item.value_last is not None
    return Record(
        content_id=item.content_id,
        offset=item.offset,
        phase=(item.anchor_pos - align) % step,
        step=step,
        correct=judge(item, result),
        logprob_target=result["logprob_target"],
        logprobs=result["logprobs"],
        align=align,
        anchor_pos=item.anchor_pos,
        key_pos=item.key_pos,
        value_pos=item.value_pos,
        answer_pos=item.answer_pos,
        same_window=same_window(item.key_pos, item.value_last, step, window, align) if together else None,
        variant=item.variant,
        target=item.target,
        padding=item.padding,
    )


def check_offsets(offsets: list[int], step: int) -> None:
    repeated = sorted(d for d, n in Counter(offsets).items() if n > 1)
    if repeated:
        raise ProbeError(f"offsets {repeated} are listed more than once; list each offset once")
    if len(set(offsets)) < 2 * step:
        raise ProbeError(
            f"offsets cover {len(set(offsets))} values, fewer than two periods of step {step}; "
            f"use at least {2 * step} offsets, e.g. --offsets 0:{max(24, 2 * step)}"
        )
    # a content's prompts are held together (one per offset), each at least its offset long, as Python ints
    ordered = sorted(offsets)
    refuse_beyond_memory(
        "--offsets",
        len(ordered),
        lambda n: PROMPT_TOKEN_BYTES * sum(ordered[:n]) + n * 4096,
        "a content's prompts at every offset are built together",
        shown=lambda n: offsets_text(ordered[:n]) if n else "0",
    )


class SweepChecks:
    """Every check a sweep makes on its items, fed one content at a time (the first pass over the
    probe's stream, before anything is scored), and what the scoring pass needs to know: the
    planned record keys, whether every candidate is one token, the longest prompt, the cost."""

    def __init__(self, geometry: Geometry, vocab_size: int | None, max_len: int | None):
        self.step, self.align, self.vocab_size, self.max_len = geometry.step, geometry.align, vocab_size, max_len
        self.local, self.window = geometry.local, geometry.window
        self.seen: dict[int, set] = {p: set() for p in range(self.step)}
        self.keys: set = set()
        self.single = True
        self.longest = 0
        self.prompt_tokens = self.candidate_tokens = self.n_candidates = 0

    def add(self, items: list[ProbeItem]) -> None:
        check_needle_placement(items, self.local, self.window)
        for item in items:
            self.seen[(item.anchor_pos - self.align) % self.step].add(item.offset)
            self.keys.add(item_key(item))
            lengths = [len(c) for c in item.candidates.values()]
            self.single = self.single and max(lengths) == 1
            self.longest = max(self.longest, len(item.input_ids) + max(lengths))
            self.prompt_tokens += len(item.input_ids)
            self.candidate_tokens += len(item.input_ids) * len(lengths) + sum(lengths)
            self.n_candidates += len(lengths)
            self._check_length(item, len(item.input_ids) + max(lengths))
            self._check_vocab(item)

    def _check_length(self, item: ProbeItem, length: int) -> None:
        if self.max_len is not None and length > self.max_len:
            raise ProbeError(
                f"content {item.content_id} at offset {item.offset} needs {length} tokens but the model accepts "
                f"at most {self.max_len} (its max_position_embeddings); nothing is truncated: use fewer pairs "
                "(--context-tokens), fewer offsets or a shorter prompt"
            )

    def _check_vocab(self, item: ProbeItem) -> None:
        if self.vocab_size is None:
            return
        top = max(max(item.input_ids), max(t for c in item.candidates.values() for t in c))
        if top >= self.vocab_size:
            raise ProbeError(
                f"the probe uses token id {top} but the model's vocabulary has {self.vocab_size} ids; "
                "build the probe from the model's own task or tokenizer"
            )

    def finish(self) -> None:
        if not self.keys:
            raise ProbeError("the probe produced no items; ask for at least one sample (--samples)")
        thin = {p: len(ds) for p, ds in self.seen.items() if len(ds) < 2}
        if thin:
            raise ProbeError(
                f"the offsets put the anchor at phase(s) {sorted(thin)} at fewer than two offsets ({thin}); every "
                f"phase needs at least two so that phase effects and periods are estimable: use consecutive "
                f"offsets, e.g. --offsets 0:{max(24, 2 * self.step)}"
            )

    def plan(self, model: Backend) -> dict:
        """What scoring costs: records, forward passes or server requests, tokens."""
        records = len(self.keys)
        sequences = records if self.single else self.n_candidates
        cost = model.cost(records, sequences, self.n_candidates)
        tokens = self.prompt_tokens if self.single or model.reuses_cache() else self.candidate_tokens
        return {"records": records, **cost, "prompt_tokens": tokens, "longest_sequence": self.longest}


def default_batch_size(longest: int) -> int:
    """Sequences per forward pass when the user does not say: 16, fewer for long prompts so a
    pass reads about TOKENS_PER_BATCH tokens (one sequence at a time from 32K tokens on)."""
    return max(1, min(16, TOKENS_PER_BATCH // max(longest, 1)))


def manifest(model: Backend, seed: int) -> dict:
    import torch

    from phasescope.version import __version__

    versions = {
        "phasescope": __version__,
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
        "model_fingerprint": model.info.fingerprint,
        "model": model.info.description,
    }


def run_sweep(
    model: Backend, probe: Probe, spec: SweepSpec, run: RunOptions, geometry: Geometry, command: str = ""
) -> SweepResult:
    """Two passes over the probe's stream of contents: the first builds and checks every item
    (and keeps only their keys), the second builds them again from the same seed and scores a
    batch of contents at a time, so memory holds one batch of prompts however long the sweep."""
    offsets, samples = list(spec.offsets), spec.samples if spec.samples is not None else probe.default_samples()
    check_offsets(offsets, geometry.step)

    def stream():
        return probe.stream(offsets, samples, np.random.default_rng(spec.seed))

    checks = SweepChecks(geometry, model.info.vocab_size, model.info.max_len)
    with _checking(run.progress, samples) as advance:  # a 20,000-content sweep takes minutes to check
        for group in stream():
            checks.add(group)
            advance()
    checks.finish()
    batch_size = run.batch_size or default_batch_size(checks.longest)
    plan = ScoringPlan(geometry.step, geometry.align, batch_size, run.prefix_reuse, checks.single, checks.longest)
    model.prepare(plan)
    if run.dry_run:
        pairs = probe.spec().get("pairs")  # key-value probes: pairs in each prompt
        extra = {"pairs_per_prompt": pairs} if isinstance(pairs, int) else {}
        timing = _dry_run_timing(model, checks, lambda: _chunks(stream(), batch_size))
        return SweepResult(None, [], 0, extra | checks.plan(model) | timing, geometry)
    saved = spec_json(spec, probe, samples, geometry, batch_size, model.info.description)
    out = Path(run.out) if run.out is not None else None
    with RunLock(out):
        done = {}
        if out is not None:
            make_manifest = lambda: {**manifest(model, spec.seed), "command": command}  # noqa: E731
            done = _open_run_dir(out, saved, model, checks.keys, make_manifest)
        total = len(checks.keys)
        scored = _score_missing(model, geometry, _chunks(stream(), batch_size), done, out, run.progress, total)
    return SweepResult(out, sorted(done.values(), key=lambda r: r.key), scored, geometry=geometry)


def spec_json(spec: SweepSpec, probe: Probe, samples: int, geometry: Geometry, batch_size: int, model: str) -> dict:
    """spec.json: what a resume must match (the keys of schema 1, kept so old run directories
    still resume), the resolved geometry, and the whole typed sweep (``SweepSpec.to_json``)."""
    return {
        "schema": SCHEMA,
        "probe": probe.spec(),
        "offsets": list(spec.offsets),
        "samples": samples,
        "seed": spec.seed,
        "step": geometry.step,
        "align": geometry.align,
        "window": geometry.window,
        "local": geometry.local,
        "geometry_source": geometry.source,
        "batch_size": batch_size,
        "model": model,
        "sweep": spec.to_json(),
    }


def _chunks(groups, contents_per_chunk: int):
    """Consecutive contents, ``contents_per_chunk`` at a time (the composition of every batch
    is fixed by the content order, so a resumed run scores exactly what an uninterrupted one would)."""
    chunk: list[ProbeItem] = []
    count = 0
    for group in groups:
        chunk += group
        count += 1
        if count == contents_per_chunk:
            yield chunk
            chunk, count = [], 0
    if chunk:
        yield chunk


TIMED_DRY_RUN_TOKENS = 8192  # the dry run times a batch only when prompts are at most this long


def _dry_run_timing(model: Backend, checks: SweepChecks, chunks) -> dict:
    """The measured estimate, or why there is none (a server's requests are not spent; a 128K
    prompt takes minutes to score here, which is not a dry run's job)."""
    if not model.timed_in_dry_run:
        return {"not_timed": "a dry run sends no request to a served model"}
    if checks.longest > TIMED_DRY_RUN_TOKENS:
        return {"not_timed": f"prompts longer than {TIMED_DRY_RUN_TOKENS:,} tokens take long to score"}
    return measured_seconds(model, chunks(), len(checks.keys))


def measured_seconds(model: Backend, chunks, records: int) -> dict:
    """The dry run's time estimate: the first batch scored twice (the first pass warms caches and
    allocations up), the second timed and scaled to every record."""
    batch = next((b for chunk in chunks for b in model.batches(chunk)), [])
    if not batch:
        return {}
    model.score(batch)
    start = time.perf_counter()
    model.score(batch)
    seconds = time.perf_counter() - start
    return {"estimated_seconds": seconds * records / len(batch), "timed_batch": len(batch)}


def _score_missing(model: Backend, geometry: Geometry, chunks, done: dict, out, progress: bool, total: int) -> int:
    """Score the batches with missing records, appending each batch to records.jsonl."""
    scored = 0
    bar = _bar(progress, total, len(done))
    for chunk in chunks:
        for batch in model.batches(chunk):
            if all(item_key(it) in done for it in batch):
                continue
            results = model.score(batch)
            step, align, window = geometry.step, geometry.align, geometry.window
            records = [record_for(it, r, step, align, window) for it, r in zip(batch, results, strict=True)]
            if any(it.generate is not None or it.grade is not None for it in batch):
                grade_records(model, batch, records)  # generation tasks, a probe's own metric (lm-eval)
            fresh = [r for r in records if r.key not in done]
            for r in fresh:
                done[r.key] = r
            if out is not None:
                with (out / "records.jsonl").open("a") as f:  # one write per batch
                    f.write("".join(r.line() for r in fresh))
            scored += len(fresh)
            if bar:
                bar.advance(bar.task_ids[0], len(fresh))
    if bar:
        bar.stop()
    return scored


RUN_FILES = (".lock", "spec.json", "manifest.json", "records.jsonl", "metrics.json", "report.html")


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
        for name in RUN_FILES:  # a run directory from someone else must not redirect a write through a link
            refuse_link(self.out / name)
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


def upgrade_spec(saved: dict) -> dict:
    """A spec.json written before some option existed, read as this version would have written
    it: a missing option of the sweep (``sweep``, its ``probe``, ``geometry``, ``remedies``,
    ``backend`` sections) reads as its default -- what the run did, since the option did not
    exist -- except where the default changed what is measured: ``same_phase`` (the text probe
    did not move its contents to one phase; the id-level probe has one phase per offset either
    way). So adding an option never stops an old run from resuming."""
    saved = json.loads(json.dumps(saved))
    sweep = saved.get("sweep")
    if not isinstance(sweep, dict):
        return saved
    text_probe = str((saved.get("probe") or {}).get("probe", "")).endswith("(text)")
    defaults = SweepSpec(str(sweep.get("model", ""))).to_json()
    defaults["probe"]["same_phase"] = not text_probe
    for key, value in defaults.items():
        if isinstance(value, dict) and isinstance(sweep.get(key), dict):
            sweep[key] = value | sweep[key]
        elif key not in sweep:
            sweep[key] = value
    if text_probe and "same_phase" not in saved["probe"]:
        saved["probe"]["same_phase"] = False
    return saved


def _open_run_dir(out: Path, spec: dict, model: Backend, planned: set, make_manifest) -> dict:
    """Create or reopen a run directory. A reopened one must hold the same sweep (spec) of the
    same model (weights fingerprint; the path it was reached by does not matter); the manifest
    (a git call) is built only when it is missing."""
    spec = json.loads(json.dumps(spec))
    spec_path, manifest_path = out / "spec.json", out / "manifest.json"
    fix = f"delete {out} to start the sweep again, or use another --out"
    model_files = [name for name in MODEL_FILES if (out / name).exists()]
    if model_files:
        raise ProbeError(
            f"--out {out} holds a model ({', '.join(model_files)}), not a sweep: its manifest would be taken for the "
            "sweep's; write the sweep to another --out (e.g. a runs/ directory)"
        )
    if spec_path.exists():
        saved = read_json(
            spec_path,
            "sweep spec",
            "its records are kept: restore spec.json (manifest.json holds the command that made it), or write this "
            "sweep to another --out",
        )
        # schema 1 (no "schema" key) has no geometry source and no typed sweep: those are not compared
        ignore = ("model", "schema", "geometry_source") + (() if "sweep" in saved else ("sweep",))
        before, now = _without_model(upgrade_spec(saved)), _without_model(spec)
        diff = differing_keys(before, now, ignore=ignore)
        if diff:
            older = (
                " (made before --same-phase existed: pass --mixed-phase to resume it)"
                if any(key.endswith("same_phase") for key in diff) and "same_phase" not in json.dumps(saved)
                else ""
            )
            raise ProbeError(
                f"{out} holds a different sweep ({differences(before, now, diff)}){older}: rerun with the run's "
                "values (its command is in manifest.json) to resume it, or use another --out"
            )
        _check_same_model(out, model, manifest_path, fix)
    elif (out / "records.jsonl").exists():
        raise ProbeError(f"{out} holds records.jsonl but no spec.json: not a sweep this version can resume; {fix}")
    else:
        atomic_write_text(spec_path, json.dumps(spec, indent=2))
    if not manifest_path.exists():
        atomic_write_text(manifest_path, json.dumps(make_manifest(), indent=2))
    found = read_records(out / "records.jsonl")
    for number, record in enumerate(found.records, start=1):
        if record.key not in planned:
            raise ProbeError(
                f"{out / 'records.jsonl'} line {number} (content {record.content_id!r}, offset {record.offset}) "
                f"is not part of this sweep; {fix}"
            )
    # a line cut by an interruption is dropped (it is rescored); a complete last line without its
    # newline gets one, so the next record is not appended onto it
    if found.truncated_tail or found.unterminated:
        atomic_write_text(out / "records.jsonl", "".join(r.line() for r in found.records))
    return {r.key: r for r in found.records}


def _without_model(spec: dict) -> dict:
    """A spec without the path the model was reached by (the weights fingerprint decides)."""
    sweep = spec.get("sweep")
    return spec | ({"sweep": {k: v for k, v in sweep.items() if k != "model"}} if isinstance(sweep, dict) else {})


def _check_same_model(out: Path, model: Backend, manifest_path: Path, fix: str) -> None:
    if not manifest_path.exists():
        return
    repair = (
        f"its records are kept: if they come from this --model, move {manifest_path.name} aside (e.g. to "
        f"{manifest_path.name}.damaged) and rerun: it is rebuilt from this model and every record is kept"
    )
    saved = read_json(manifest_path, "sweep manifest", repair).get("model_fingerprint") or ""
    if not saved and model.info.fingerprint and (out / "records.jsonl").exists():
        raise ProbeError(
            f"{manifest_path} records no weights fingerprint, so its records cannot be checked to come from this "
            f"model; resuming could mix two models' records; {fix}"
        )
    if saved and model.info.fingerprint and saved != model.info.fingerprint:
        raise ProbeError(
            f"{out} was swept with another model (weights fingerprint {saved}, now {model.info.fingerprint}): resuming "
            f"would mix two models' records; {fix}"
        )


@contextmanager
def _checking(enabled: bool, contents: int):
    """A transient bar over the first pass (every content built and checked before scoring)."""
    if not enabled:
        yield lambda: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("building and checking contents"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        transient=True,
    ) as bar:  # fmt: skip
        task = bar.add_task("contents", total=contents)
        yield lambda: bar.advance(task)


def _rate_column():
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        """Records scored per second (rich's own speed column counts bytes)."""

        def render(self, task) -> Text:
            return Text("" if task.speed is None else f"{task.speed:.1f} rec/s")

    return RateColumn()


def _bar(enabled: bool, total: int, completed: int):
    if not enabled:
        return None
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(
        TextColumn("sweep"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("records"),
        TaskProgressColumn(),
        _rate_column(),
        TimeElapsedColumn(),
        TextColumn("elapsed,"),
        TimeRemainingColumn(),
        TextColumn("left"),
    )
    bar.add_task("records", total=total, completed=completed)
    bar.start()
    return bar
