"""Run directories as results, without torch: ``phasescope.analyze``, ``report`` and
``compare`` read records and write metrics, figures and pages (``phasescope analyze`` never
loads a model: tests/test_imports.py checks torch stays unloaded)."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

from phasescope.errors import InputError
from phasescope.rundir import PAIRED, RunDir
from phasescope.rundir.files import atomic_write_text, read_json
from phasescope.rundir.metrics import Metrics
from phasescope.rundir.records import Record, check_against_spec, read_records
from phasescope.rundir.saved import SavedSweep

if TYPE_CHECKING:
    from phasescope.reporting.compare import ComparedRun


MIN_RESAMPLES, MAX_RESAMPLES = 100, 100_000


READ_ONLY = (errno.EACCES, errno.EPERM, errno.EROFS)


def analyze(run_dir: str | Path, n_resamples: int = 2000, *, must_save: bool = True) -> Metrics:
    """Statistics from ``records.jsonl`` alone; writes ``metrics.json`` (with the digest of the
    records it describes, so a report can tell when they changed). ``must_save=False`` (a reader
    such as export or compare that writes elsewhere): a run that cannot be written to is
    analyzed in memory, with a warning, instead of refused."""
    from phasescope.analysis.stats import analyze_records

    run_dir = run_path(run_dir, "run_dir")
    if not run_dir.is_dir():
        raise InputError(f"{run_dir} is not a run directory (pass the --out directory of `phasescope sweep`)")
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, int):
        raise InputError(f"n_resamples must be an integer (e.g. 2000), got {n_resamples!r}")
    if not MIN_RESAMPLES <= n_resamples <= MAX_RESAMPLES:  # 1e8 draws ran for hours, silently
        raise InputError(f"n_resamples={n_resamples} is invalid; allowed: {MIN_RESAMPLES} to {MAX_RESAMPLES:,}")
    path = RunDir(run_dir).records
    if not path.exists():
        check_sweep_run_dir(run_dir)  # says what the directory is instead (a model: sweep it elsewhere)
    found = read_records(path)
    if not found.records:
        raise InputError(f"{path} holds no records; run `phasescope sweep ... --out {run_dir}` first")
    spec = RunDir(run_dir).read_sweep()
    step = spec.step
    if step is not None and found.records[0].step != step:  # check_records: one step in all records
        raise InputError(
            f"{path}: the records say step {found.records[0].step}, but {spec.path} says the sweep counted phases with "
            f"step {step}; the records belong to another sweep (phases 0..{step - 1} would be misread)"
        )
    check_against_spec(found.records, spec, str(path))
    metrics = analyze_records(found.records, seed=spec.seed, n_resamples=n_resamples)
    from phasescope.analysis.candidates import with_answers

    metrics["candidate_probabilities"] = with_answers(metrics["candidate_probabilities"], spec.contents)
    from phasescope.analysis.task_metrics import task_metrics

    if (per_task := task_metrics(found.records)) is not None:  # lm-eval tasks: their own metrics per phase
        metrics["task_metrics"] = per_task
    from phasescope.analysis.per_task import per_band as band_verdicts
    from phasescope.analysis.per_task import per_task as task_verdicts

    if (tasks := task_verdicts(found.records, spec.seed, n_resamples)) is not None:  # one verdict per task
        metrics["per_task"] = tasks
        pooled = metrics["verdict"]["sentence"]
        metrics["verdict"]["sentence"] = (
            f"{len(tasks)} tasks pooled (each task's own verdict follows, every task's tests sharing alpha by Holm): "
            f"{pooled}"
        )
    if (bands := band_verdicts(found.records, spec.seed, n_resamples)) is not None:  # one verdict per length band
        metrics["per_band"] = bands
        pooled = metrics["verdict"]["sentence"]
        metrics["verdict"]["sentence"] = f"{len(bands)} length bands pooled (each band's own verdict follows): {pooled}"
    metrics["n_resamples"] = n_resamples
    metrics["records_sha256"] = records_digest(path)
    metrics["schema"] = METRICS_SCHEMA
    notes = [partial_note(spec, found.records) if spec.raw else missing_spec_note(Path(spec.path))]
    if found.truncated_tail:
        notes.append("the last line of records.jsonl was cut short (an interrupted sweep) and is left out")
    if any(notes):
        metrics["records_note"] = "; ".join(n for n in notes if n)
    metrics["metrics_sha256"] = metrics_digest(metrics)
    # allow_nan=False: a statistic without data is null, never a NaN a reader would mistake for a number
    text = json.dumps(metrics, indent=2, sort_keys=True, allow_nan=False)
    try:
        atomic_write_text(RunDir(run_dir).metrics, text)
    except OSError as err:
        if must_save or err.errno not in READ_ONLY:
            raise
        warnings.warn(
            f"{run_dir} cannot be written to ({err.strerror}): its statistics are computed in memory and not kept "
            "in metrics.json",
            stacklevel=2,
        )
    return Metrics.from_json(json.loads(text), str(RunDir(run_dir).metrics))  # what a later reader gets


# 2: verdict and log_score; 3: the verdict's claims under one alpha (Holm), mixed start phases;
# 4: factors (where the phase lives), phase_of, fixed_contents; 5: per_task, the period named
# against the step; 6: the gap bias-corrected by data fission; 7: each factor tested at every candidate
# period, the lengths tested, per_band. A metrics.json of another schema is recomputed when read
METRICS_SCHEMA = 7


def metrics_digest(metrics: dict) -> str:
    """Digest of everything in ``metrics`` but itself: a report can tell a metrics.json that was
    edited after `analyze` wrote it (and then recomputes it rather than show the edit)."""
    body = {k: v for k, v in metrics.items() if k != "metrics_sha256"}
    return "sha256:" + hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def partial_note(spec: SavedSweep, records: list[Record]) -> str | None:
    """What an interrupted sweep leaves: fewer records than its spec plans (contents x offsets x
    renderings). lm-eval sweeps count documents per task, so they are not checked here."""
    offsets, samples = spec.offsets, spec.samples
    if offsets is None or samples is None or not spec.contents_by_sample:
        return None
    variants = len({r.variant for r in records})
    planned = samples * len(offsets) * variants
    if len(records) >= planned:
        return None
    return (
        f"partial run: {len(records)} of {planned} planned records (an interrupted sweep?); the statistics describe "
        "only the records present -- rerun the sweep's command (manifest.json) to finish it"
    )


def missing_spec_note(spec_path: Path) -> str:
    """What a run without its spec.json can and cannot say."""
    state = "is empty" if spec_path.exists() else "is missing"
    return (
        f"{spec_path} {state}: the records cannot be checked against the sweep that wrote them (its offsets, "
        "contents and renderings), and a partial run cannot be told from a finished one; the statistics describe the "
        "records as they are"
    )


def records_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def current_metrics(run_dir: str | Path) -> Metrics:
    """The run's metrics.json, recomputed (``analyze``) when it is missing, unreadable, of an
    older schema, edited after `analyze` wrote it (its own digest differs; said in a warning), or
    describes other records than those on disk (its records digest differs)."""
    run_dir = run_path(run_dir, "run_dir")
    metrics_path = RunDir(run_dir).metrics
    current = None
    if metrics_path.exists():
        try:
            current = read_json(metrics_path, "metrics")
        except InputError:
            current = None  # recomputed below from the records
    current = current if isinstance(current, dict) else None
    records = RunDir(run_dir).records
    stale = current is None or not records.exists() or current.get("records_sha256") != records_digest(records)
    if stale or current.get("schema") != METRICS_SCHEMA:
        return analyze(run_dir, must_save=False)
    if current.get("metrics_sha256") != metrics_digest(current):
        warnings.warn(
            f"{metrics_path} was changed after `phasescope analyze` wrote it (its digest differs); it is recomputed "
            "from records.jsonl, and the edit is not shown",
            stacklevel=2,
        )
        return analyze(run_dir, must_save=False)
    try:
        return Metrics.from_json(current, str(metrics_path))
    except (InputError, TypeError):  # a key missing or misshapen although the digest matches: recomputed
        return analyze(run_dir, must_save=False)


def report(run_dir: str | Path) -> Path:
    """Figures and a self-contained report.html. The report always describes the records on
    disk: metrics.json is recomputed when it is missing, unreadable or older than the records."""
    from phasescope.reporting.html import write_report

    return write_report(run_path(run_dir, "run_dir"), current_metrics(run_dir))


def compare(runs, out: str | Path, labels: list[str] | None = None) -> Path:
    """Several sweep run directories side by side in one self-contained ``out/compare.html``:
    per-phase accuracy table, accuracy over offsets overlaid, phase gaps as a forest plot.

    ``runs``: a list of ``phasescope sweep --out`` directories (meant for two or more; one
    works). Each run's metrics.json is recomputed first when it is missing or stale, as in
    ``report``. ``labels``: one name per run, in order (default: each directory's name)."""
    from phasescope.reporting.compare import write_compare

    out = run_path(out, "out")  # before the runs are read: a missing out fails at once
    return write_compare(compared_runs(runs, labels), out)


def compared_runs(runs, labels: list[str] | None = None) -> list[ComparedRun]:
    """``ComparedRun`` (label, directory, current metrics) for each run; every path and label
    is checked before any metrics are recomputed, so a typo fails fast."""
    from phasescope.reporting.compare import ComparedRun, run_labels

    if isinstance(runs, (str, Path)) or isinstance(labels, str):
        raise InputError("runs and labels must be lists, e.g. compare(['runs/a', 'runs/b'], out, labels=['a', 'b'])")
    paths = [run_path(r, "each run") for r in runs]
    if not paths:
        raise InputError("no run directory to compare; pass the --out directories of `phasescope sweep` (two or more)")
    names = run_labels(paths, labels)
    for path in paths:
        check_sweep_run_dir(path)
    return [ComparedRun(name, path, current_metrics(path)) for name, path in zip(names, paths, strict=True)]


def paired(
    runs,
    labels: list[str] | None = None,
    n_resamples: int = 2000,
    tolerance: float | None = None,
    reference_free: bool = False,
) -> dict:
    """Two runs on identical items, record by record (``analysis.paired``): departures per cell of
    the needle's and the prompt end's phase, the departure tests, the log-prob differences, and the
    sentence saying where the second run departs from the first. Refused, naming the first
    difference, unless every shared (content, offset, variant) has the same prompt and candidates
    token for token. ``reference_free``: one run, compared with the known right answers (every
    record right). ``tolerance``: nats of |Δ log p(target)| that count as a departure (default 1)."""
    return _paired(runs, labels, n_resamples, tolerance, reference_free)[0]


def _paired(runs, labels, n_resamples, tolerance, reference_free) -> tuple[dict, list, list[Path]]:
    """(the comparison, its pairs, the run directories)."""
    from phasescope.analysis.departures import DEFAULT_TOLERANCE
    from phasescope.analysis.paired import pair_records, paired_statistics
    from phasescope.reporting.compare import run_labels

    paths = [Path(r) for r in runs] if not isinstance(runs, (str, Path)) else [Path(runs)]
    wanted = 1 if reference_free else 2
    if len(paths) != wanted:
        usage = "compare --paired --reference-free RUN" if reference_free else "compare --paired A B"
        raise InputError(f"a paired comparison takes {wanted} run(s) (got {len(paths)}): {usage}")
    names = tuple(run_labels(paths, labels))
    loaded = [_checked_records(path) for path in paths]
    if reference_free:
        names = ("the known answer", names[0])
        pairs = [(None, r) for r in loaded[0]]
        left_out = 0
    else:
        pairs = pair_records(*loaded, names=names)
        left_out = max(len(loaded[0]), len(loaded[1])) - len(pairs)
    tolerance = DEFAULT_TOLERANCE if tolerance is None else tolerance
    result = paired_statistics(pairs, names, n_resamples=n_resamples, tolerance=tolerance)
    result["left_out"] = left_out  # records of one run only (a run not finished): not compared
    return result, pairs, paths


def _all_broken(runs, labels, reference_free: bool) -> tuple[dict, list, list[Path]] | None:
    """When a run holds no record because every answer broke the protocol (protocol.jsonl): an
    empty comparison, so the gate fails on the protocol instead of stopping at the missing records."""
    from phasescope.reporting.compare import run_labels

    paths = [Path(r) for r in runs] if not isinstance(runs, (str, Path)) else [Path(runs)]
    empty = [p for p in paths if p.is_dir() and not _has_records(p) and RunDir(p).read_protocol()]
    if not empty:
        return None
    names = tuple(run_labels(paths, labels))
    if reference_free:
        names = ("the known answer", names[0])
    what = ", ".join(f"{p}: {len(RunDir(p).read_protocol())}" for p in empty)
    comparison = {
        "names": list(names), "n_pairs": 0, "n_contents": 0, "kinds": {}, "adjusted_p": {}, "p_value": 1.0,
        "step": None, "align": 0, "cells": [], "lengths": None, "bands": None, "logprob": None, "left_out": 0,
        "sentence": f"no record to compare: every answer broke the protocol ({what} findings in protocol.jsonl)",
    }  # fmt: skip
    return comparison, [], paths


def _has_records(path: Path) -> bool:
    file = RunDir(path).records
    return file.is_file() and bool(file.read_text().strip())


def _checked_records(path: Path) -> list[Record]:
    check_sweep_run_dir(path)
    records = read_records(RunDir(path).records).records
    check_against_spec(records, RunDir(path).read_sweep(), str(RunDir(path).records))
    if not records:
        raise InputError(f"{path} holds no records yet; run its sweep first")
    return records


def gate(
    runs,
    out: str | Path,
    labels: list[str] | None = None,
    thresholds=None,
    n_resamples: int = 2000,
    reference_free: bool = False,
    repeats: dict | None = None,
) -> tuple[dict, dict]:
    """The paired comparison as a CI gate (``phasescope.gate``): (the comparison, the gate), with
    gate.json, junit.xml, summary.md and a reproducer per failing cell written to ``out``. The gate's
    ``exit_code`` is 0 when the second run does not depart from the first beyond ``thresholds``
    (a ``gate.Thresholds``), 1 when it does."""
    from phasescope.gate import Thresholds, decide, protocol_findings, reproducers, write_gate, write_reproducers

    thresholds = thresholds or Thresholds()
    if (broken := _all_broken(runs, labels, reference_free)) is not None:
        comparison, pairs, paths = broken
    else:
        comparison, pairs, paths = _paired(runs, labels, n_resamples, thresholds.logprob_tol, reference_free)
    protocol = {}
    for name, path in zip(comparison["names"][-len(paths) :], paths, strict=True):
        scored = {tuple(r.key) for r in read_records(RunDir(path).records).records}
        protocol[name] = protocol_findings(RunDir(path).read_protocol(), scored)
    decided = decide(comparison, thresholds, protocol, repeats)
    samples = [RunDir(path).read_samples() for path in paths]
    servers = [RunDir(path).read_manifest().get("server") for path in paths]
    if reference_free:
        samples, servers = [{}, *samples], [None, *servers]
    found = reproducers(pairs, comparison, tuple(samples), tuple(servers), thresholds.logprob_tol)
    out = Path(out)
    written = write_reproducers(out, found) if not decided["passed"] else []
    decided["reproducers"] = [str(p) for p in written]
    write_gate(out, decided, written)
    atomic_write_text(out / PAIRED, json.dumps(comparison, indent=1, allow_nan=False) + "\n")
    return comparison, decided


def run_path(value, name: str) -> Path:
    """``value`` as a path; InputError naming the argument when it is not one (``analyze(123)``)."""
    if not isinstance(value, (str, os.PathLike)):
        raise InputError(f"{name} must be a path (a str or pathlib.Path), got {value!r}")
    return Path(value)


def check_sweep_run_dir(path: Path) -> None:
    """InputError saying what is missing when ``path`` is not a directory written by a sweep."""
    make = f"make one with `phasescope sweep --model MODEL --out {path}`"
    if not path.exists():
        raise InputError(f"run directory {path} does not exist; {make}, or check the path")
    if not path.is_dir():
        raise InputError(f"{path} is a file, not a run directory; pass the --out directory of `phasescope sweep`")
    if not RunDir(path).records.exists():
        from phasescope.rundir.owner import KINDS, kinds_of

        for kind, markers in kinds_of(path).items():  # another command's directory: a sweep may not go there
            _, what, maker = KINDS[kind]
            fix = "pass the --out directory of `phasescope sweep`"
            if kind == "model":  # sweep refuses to write into a model's directory: advise one of its own
                fix += (
                    f", or sweep this model into a directory of its own: phasescope sweep --model {path} --out runs/X"
                )
            raise InputError(f"{path} holds {what} ({', '.join(markers)}, made by `{maker}`), not a sweep run: {fix}")
        raise InputError(
            f"{path} is not a sweep run directory: it has no records.jsonl; pass the --out directory of "
            f"`phasescope sweep`, or {make}"
        )
