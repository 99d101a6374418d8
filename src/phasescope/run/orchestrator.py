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
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from phasescope.backends.base import Backend, ScoringPlan, item_key
from phasescope.errors import InputError
from phasescope.probes.base import Probe, ProbeError, ProbeItem, judge
from phasescope.run.checks import SweepChecks, check_offsets
from phasescope.run.generation import grade_records
from phasescope.run.manifest import manifest
from phasescope.run.progress import checking_bar, scoring_bar
from phasescope.run.samples import sample_logger
from phasescope.rundir import RunDir, RunLock
from phasescope.rundir.records import Record, plan_digest, same_window
from phasescope.specs import SCHEMA, Geometry, RunOptions, SweepIdentity, SweepSpec

TOKENS_PER_BATCH = 32768  # default batch size: about this many tokens per forward pass


@dataclass
class SweepResult:
    run_dir: Path | None
    records: list[Record]
    scored: int  # records scored by this call (0: the run was already complete)
    plan: dict | None = None  # with dry_run: what the sweep would cost, nothing scored or written
    geometry: Geometry | None = None  # what phases were counted with (step, window, align, L, its source)


def record_for(item: ProbeItem, result: dict, step: int, align: int, window: int, digest: str, decode=None) -> Record:
    """The record of a scored item: its positions and phase, the backend's log-probs, whether it
    was answered correctly (``probes.base.judge``), the digest of what it was scored on (the
    checking pass's ``prompt_digest``) and what the model answered (the backend's ``answer_ids``;
    its text and the target's with ``decode``, the model's tokenizer's)."""
    together = item.key_pos is not None and item.value_last is not None
    answer = result.get("answer_ids")
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
        end_phase=(item.answer_pos - align) % step,
        prompt_digest=digest,
        request_lengths=result.get("request_lengths"),
        answer_from=result.get("answer_from"),
        answer_ids=answer,
        answer_text=decode(answer) if decode is not None and answer is not None else None,
        target_text=decode(item.candidates[item.target]) if decode is not None else None,
        context_tokens=item.context_tokens,
        token_logprobs=result.get("token_logprobs"),
        token_correct=result.get("token_correct"),
    )


def default_batch_size(longest: int) -> int:
    """Sequences per forward pass when the user does not say: 16, fewer for long prompts so a
    pass reads about TOKENS_PER_BATCH tokens (one sequence at a time from 32K tokens on)."""
    return max(1, min(16, TOKENS_PER_BATCH // max(longest, 1)))


def run_sweep(
    model: Backend,
    probe: Probe,
    spec: SweepSpec,
    run: RunOptions,
    geometry: Geometry,
    command: str = "",
    say=lambda _: None,
) -> SweepResult:
    """Two passes over the probe's stream of contents: the first builds and checks every item
    (and keeps only their keys), the second builds them again from the same seed and scores a
    batch of contents at a time, so memory holds one batch of prompts however long the sweep."""
    offsets, samples = list(spec.offsets), spec.samples if spec.samples is not None else probe.default_samples()
    check_offsets(offsets, geometry.step)

    def stream(shard=run.shard):
        return in_shard(probe.stream(offsets, samples, np.random.default_rng(spec.seed)), shard)

    try:
        whole, parts = _check_contents(stream(shard=None), geometry, model, samples, run)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(NOTHING_YET) from None
    checks = whole if run.shard is None else parts[run.shard[0]]
    if not checks.keys and whole.keys:
        raise ProbeError(
            f"--shard {run.shard[0]}/{run.shard[1]} holds no content: the sweep has {samples} contents and part I "
            f"scores contents I, I + N, ...; split it into at most {samples} parts"
        )
    checks.finish()
    batch_size = run.batch_size or default_batch_size(whole.longest)
    plan = ScoringPlan(geometry.step, geometry.align, batch_size, run.prefix_reuse, checks.single, checks.longest)
    model.prepare(plan)
    if run.dry_run:
        pairs = probe.spec().get("pairs")  # key-value probes: pairs in each prompt
        extra = {"pairs_per_prompt": pairs} if isinstance(pairs, int) else {}
        timing = _dry_run_timing(model, checks, lambda: _chunks(stream(), batch_size))
        which = {"part": run.shard[0]} if run.shard else {}
        every = {"parts": [part.plan(model) for _, part in sorted(parts.items())]} if run.shard else {}
        return SweepResult(None, [], 0, which | extra | checks.plan(model) | timing | every, geometry)
    saved = spec_json(spec, probe, samples, geometry, batch_size, model.info.description)
    saved |= shard_json(run.shard, whole.keys)
    identity = SweepIdentity.of(spec, samples, geometry, batch_size)
    out = Path(run.out) if run.out is not None else None
    if run.resume and out is not None and not (RunDir(out).spec.exists() or RunDir(out).records.exists()):
        raise ProbeError(f"--resume: {out} holds no sweep to resume; drop --resume to start one")
    with RunLock(out):
        done = {}
        if out is not None:
            make_manifest = lambda: {**manifest(model, spec.seed), "command": command}  # noqa: E731
            done = RunDir(out).open_for_sweep(
                saved, identity, model.info.fingerprint, checks.keys, make_manifest, run.adopt_records
            )
        total = len(checks.keys)
        if done and len(done) < total:
            say(f"resuming {out}: {len(done):,} of {total:,} records were scored; scoring the rest")
        log = sample_logger(model, out) if run.log_samples and out is not None else None
        chunks = _chunks(stream(), batch_size)
        scored = _score_missing(model, geometry, chunks, checks.keys, done, out, run.progress, log)
    return SweepResult(out, sorted(done.values(), key=lambda r: r.key), scored, geometry=geometry)


def spec_json(spec: SweepSpec, probe: Probe, samples: int, geometry: Geometry, batch_size: int, model: str) -> dict:
    """spec.json: what a resume must match (the keys of schema 1, kept so old run directories
    still resume), the resolved geometry, and the whole typed sweep (``SweepSpec.to_json``)."""
    return {
        "schema": SCHEMA,
        "probe": probe.spec(),
        "contents_by_sample": probe.contents_by_sample,
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


def in_shard(groups, shard: tuple[int, int] | None):
    """The contents of one part of a split sweep: the i-th of every N, by their place in the probe's
    stream (the stream draws every content, so each keeps the random state it has unsplit)."""
    for i, group in enumerate(groups):
        if shard is None or i % shard[1] == shard[0]:
            yield group


def _check_contents(groups, geometry: Geometry, model: Backend, samples: int, run: RunOptions):
    """The first pass: every content checked, as the unsplit sweep does (a bad content fails every
    part alike, and a part's default batch size is the unsplit sweep's). Returns the whole sweep's
    checks and, for a part, its own (by part index; every part's on a dry run, for its table)."""

    def fresh() -> SweepChecks:
        return SweepChecks(geometry, model.info.vocab_size, model.info.max_len)

    whole, parts = fresh(), {}
    if run.shard is not None:
        wanted = range(run.shard[1]) if run.dry_run else [run.shard[0]]
        parts = {index: fresh() for index in wanted}
    with checking_bar(run.progress, samples) as advance:  # a 20,000-content sweep takes minutes to check
        for i, group in enumerate(groups):
            whole.add(group)
            if run.shard is not None and i % run.shard[1] in parts:
                parts[i % run.shard[1]].add(group)
            advance()
    return whole, parts


def shard_json(shard: tuple[int, int] | None, planned: dict[tuple, str]) -> dict:
    """spec.json's ``shard`` (absent unsplit): which part of a split sweep the run holds, and the
    digest of the whole sweep's prompts (``planned``: record key -> prompt digest), which merge
    checks the joined records against."""
    if shard is None:
        return {}
    return {"shard": {"index": shard[0], "count": shard[1], "plan_sha256": plan_digest(planned)}}


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
    warm = time.perf_counter()
    model.score(batch)
    start = time.perf_counter()
    model.score(batch)
    seconds = time.perf_counter() - start
    estimate = {"estimated_seconds": seconds * records / len(batch), "timed_batch": len(batch)}
    return estimate | {"timing_seconds": time.perf_counter() - warm}  # what timing cost the dry run itself


def _score_missing(
    model: Backend, geometry: Geometry, chunks, planned: dict, done: dict, out, progress: bool, log=None
) -> int:
    """Score the batches with missing records, appending each batch to records.jsonl (and, with
    ``log``, its items' prompts to samples.jsonl first). ``planned``: every record key -> its
    prompt's digest (``SweepChecks.keys``)."""
    total = len(planned)
    bar = scoring_bar(progress, total, len(done))
    try:
        with StopBetweenBatches() as stop:
            return _score_batches(model, geometry, chunks, planned, done, out, bar, log, stop)
    except KeyboardInterrupt:
        raise KeyboardInterrupt(_kept(done, total, out)) from None
    finally:
        if bar:
            bar.stop()


NOTHING_YET = "nothing was written yet (the sweep was still building and checking its items); rerun the same command"


class StopBetweenBatches:
    """Ctrl-C during scoring sets a flag the loop reads after each batch, so the interruption is
    never lost: a KeyboardInterrupt raised inside some object's ``__del__`` (a tokenizer's, a
    regex's) is printed and ignored by Python, and the sweep ran on. A second Ctrl-C stops at once.
    Only in the main thread (where Python lets a handler be set); elsewhere a no-op."""

    def __init__(self):
        self.asked, self.previous = False, None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self.previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.asked:
            raise KeyboardInterrupt
        self.asked = True

    def __exit__(self, *exc) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)


def _kept(done: dict, total: int, out) -> str:
    """What an interruption left: the records on disk and how many remain (never 'work is saved'
    when none is)."""
    if out is None:
        return "nothing was saved (no --out): rerun with --out DIR to keep finished records"
    if not done:
        return f"no record had finished, so {out} holds none yet; rerun the same command to start again"
    return (
        f"{len(done):,} of {total:,} records are on disk in {out} ({total - len(done):,} to score); rerun the same "
        "command to continue"
    )


class ProtocolFindings:
    """Items whose server answer broke the protocol (a result ``{"protocol": {kind, message}}``):
    recorded in RUN/protocol.jsonl as findings, never as records; past the backend's
    ``protocol_faults_allowed`` the sweep stops, naming the last."""

    def __init__(self, model: Backend, out):
        self.allowed = getattr(model, "protocol_faults_allowed", 0)
        self.out, self.count = out, 0

    def take(self, batch: list[ProbeItem], results: list[dict]) -> tuple[list[ProbeItem], list[dict]]:
        """(the items and results to record), after writing the findings."""
        found = [(it, r["protocol"]) for it, r in zip(batch, results, strict=True) if "protocol" in r]
        if not found:
            return batch, results
        lines = "".join(json.dumps(self._line(it, fault)) + "\n" for it, fault in found)
        if self.out is not None:
            RunDir(self.out).append_protocol(lines)
        self.count += len(found)
        if self.count > self.allowed:
            where = "nothing recorded (no --out)"
            if self.out is not None:
                where = f"recorded in {RunDir(self.out).protocol}"
            raise InputError(
                f"{found[-1][1]['message']}; a serving stack's answer that broke the protocol is a finding, not a "
                f"wrong answer ({self.count} in this sweep, {where}); the sweep stops after --protocol-faults "
                f"{self.allowed} (raise it to record them all and go on, as phasescope check does). Scored records "
                "are kept; rerun the same command to resume"
            )
        kept = [(it, r) for it, r in zip(batch, results, strict=True) if "protocol" not in r]
        return [it for it, _ in kept], [r for _, r in kept]

    @staticmethod
    def _line(item: ProbeItem, fault: dict) -> dict:
        return {"content_id": item.content_id, "offset": item.offset, "variant": item.variant, "kind": fault["kind"],
                "message": fault["message"], "prompt_length": len(item.input_ids),
                "anchor_pos": item.anchor_pos}  # fmt: skip


def _score_batches(
    model: Backend, geometry: Geometry, chunks, planned: dict, done: dict, out, bar, log, stop=None
) -> int:
    scored = 0
    decode = getattr(model.info.tokenizer, "decode", None)  # answers and targets as text
    faults = ProtocolFindings(model, out)
    for chunk in chunks:
        for batch in model.batches(chunk):
            if all(item_key(it) in done for it in batch):
                continue
            results = model.score(batch)
            batch, results = faults.take(batch, results)
            step, align, window = geometry.step, geometry.align, geometry.window
            records = [
                record_for(it, r, step, align, window, planned[item_key(it)], decode)
                for it, r in zip(batch, results, strict=True)
            ]
            if any(it.generate is not None or it.grade is not None for it in batch):
                grade_records(model, batch, records)  # generation tasks, a probe's own metric (lm-eval)
            fresh = [r for r in records if r.key not in done]
            if log is not None:
                log([(it, r) for it, r in zip(batch, records, strict=True) if r.key not in done])
            if out is not None:
                RunDir(out).append("".join(r.line() for r in fresh))  # one write per batch
            for r in fresh:  # after the write: an interruption counts only records on disk
                done[r.key] = r
            scored += len(fresh)
            if bar:
                bar.advance(bar.task_ids[0], len(fresh))
            if stop is not None and stop.asked:
                raise KeyboardInterrupt
    return scored
