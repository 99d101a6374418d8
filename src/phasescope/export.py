"""A run's numbers as tables (``load_run``, ``phasescope export``) and as an lm-eval results file.

``load_run(RUN)`` returns pandas DataFrames (``pip install 'phasescope[export]'``):

* ``records``: one row per scored (content, offset, variant): the record's fields (the target's
  log-prob is ``logprob_target``), the other candidates' log-probs as ``logprob.NAME``, the
  padding as ``padding_*``, lm-eval metrics as ``metric.KEY`` (``metric.acc,none``), a prompt
  file's ``id`` and lm-eval's ``task`` and ``doc_id`` when the probe wrote them;
* ``phases``: the per-phase table of ``metrics.json`` (raw and drift-adjusted accuracy, effects);
* ``offsets``: accuracy and phase at each offset;
* ``task_metrics``: lm-eval tasks' own metrics per phase, with intervals (empty otherwise).

``export(RUN, "csv" | "parquet" | "jsonl", out)`` writes each table to ``out/NAME.EXT``;
``export(RUN, "lm-eval", out)`` writes one JSON shaped like lm-eval's results
(``results[task][metric]`` at offset 0, lm-eval's own rendering, with its stderr) plus
``phase_results[task][phase][metric]`` with 95% intervals.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from phasescope.errors import InputError
from phasescope.rundir import LM_EVAL_RESULTS, RunDir
from phasescope.rundir.files import atomic_write_bytes, atomic_write_text, refuse_link
from phasescope.rundir.metrics import Metrics
from phasescope.rundir.records import Record, check_against_spec, read_records
from phasescope.rundir.saved import SavedSweep

FORMATS = ("csv", "parquet", "jsonl", "lm-eval")


@dataclass
class RunTables:
    records: object  # pandas.DataFrame
    phases: object
    offsets: object
    task_metrics: object

    def items(self):
        return {
            "records": self.records,
            "phases": self.phases,
            "offsets": self.offsets,
            "task_metrics": self.task_metrics,
        }.items()


def _pandas():
    try:
        import pandas
    except ImportError:
        raise InputError("load_run and export need pandas: pip install 'phasescope[export]'") from None
    return pandas


def _run(run_dir) -> tuple[Path, list[Record], Metrics]:
    from phasescope.results import check_sweep_run_dir, current_metrics

    path = Path(run_dir)
    check_sweep_run_dir(path)
    records = read_records(RunDir(path).records).records
    if not records:
        raise InputError(f"{RunDir(path).records} holds no records; run the sweep first")
    check_against_spec(records, RunDir(path).read_sweep(), str(RunDir(path).records))
    return path, records, current_metrics(path)


def load_run(run_dir) -> RunTables:
    """The run's records, per-phase, per-offset and task-metric tables as pandas DataFrames."""
    pd = _pandas()
    _, records, metrics = _run(run_dir)
    offsets = pd.DataFrame(
        {"offset": metrics.offsets, "accuracy": metrics.accuracy_by_offset},
    )
    phase_by_offset = metrics.phase_by_offset
    if isinstance(phase_by_offset, list) and len(phase_by_offset) == len(offsets):
        offsets["phase"] = phase_by_offset
    rows = [flat_record(r) for r in records]
    if samples := RunDir(run_dir).read_samples():  # sweep --log-samples: what each record was scored on
        rows = [row | _sample_columns(samples.get(r.key)) for row, r in zip(rows, records, strict=True)]
    return RunTables(
        records=_numeric(pd.DataFrame(rows)),
        phases=_numeric(pd.DataFrame([{k: _cell(v) for k, v in vars(row).items()} for row in metrics.phases])),
        offsets=offsets,
        task_metrics=_numeric(pd.DataFrame(task_metric_rows(metrics.task_metrics or {}), columns=TASK_COLUMNS)),
    )


def _numeric(frame):
    """Columns of numbers with gaps as float columns with NaN (a None made them object columns,
    which pandas cannot average or plot)."""
    import numbers

    for name in frame.columns:
        values = frame[name]
        present = values.dropna()
        if values.dtype == object and len(present) < len(values):
            if all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in present):
                frame[name] = values.astype(float)
    return frame


def _sample_columns(sample: dict | None) -> dict:
    if sample is None:
        return {"prompt_ids": None, "prompt_text": None}
    return {"prompt_ids": _cell(sample.get("prompt_ids")), "prompt_text": sample.get("prompt_text")}


TASK_COLUMNS = ["task", "metric", "phase", "n", "contents", "value", "ci_low", "ci_high"]


def task_metric_rows(per_task: dict) -> list[dict]:
    rows = []
    for task, metrics in per_task.items():
        for metric, summary in metrics.items():
            for p in summary["phases"]:
                ci = p["ci"] or [None, None]
                rows.append(
                    dict(
                        zip(
                            TASK_COLUMNS,
                            [task, metric, p["phase"], p["n"], p["contents"], p["value"], *ci],
                            strict=True,
                        )
                    )
                )
    return rows


def flat_record(record: Record) -> dict:
    """One record as flat columns (nested log-probs, padding and task metrics spread out). The
    target's log-prob is ``logprob_target`` alone: a ``logprob.target`` beside it (lm-eval names its
    candidate so) repeated the same number under a second name."""
    flat = {}
    fields = record.to_json()
    for key, value in fields.items():
        if key == "logprobs":
            target = fields.get("target", "right")
            flat |= {f"logprob.{name}": v for name, v in value.items() if name != target}
        elif key == "task_metrics":
            flat |= {f"metric.{name}": v for name, v in value.items()}
        elif key == "padding" and isinstance(value, dict):
            flat |= {f"padding_{name}": v for name, v in value.items()}
        else:
            flat[key] = _cell(value)
    return flat


def _cell(value):
    """A table cell: lists stay lists (parquet and jsonl keep them typed; prompt_ids came back from
    parquet as a string), an object is its JSON text."""
    return json.dumps(value) if isinstance(value, dict) else value


def _as_text(value):
    """A CSV cell: a list as its JSON text (a spreadsheet has no list type)."""
    return json.dumps(value) if isinstance(value, list) else value


def export(run_dir, fmt: str, out=None) -> list[Path]:
    """Write the run in ``fmt`` (csv, parquet, jsonl: one file per table in ``out``, default
    RUN/export; lm-eval: one results JSON, default RUN/lm_eval_results.json). Returns the paths."""
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r} is invalid; allowed: {' | '.join(FORMATS)}")
    if fmt == "lm-eval":
        path = Path(out) if out else Path(run_dir) / LM_EVAL_RESULTS
        if out and path.exists() and not _our_lm_eval_file(path):
            raise InputError(f"--out {path} exists and is not a phasescope lm-eval export; choose a new file")
        _, records, metrics = _run(run_dir)
        results = lm_eval_results(records, metrics, RunDir(run_dir).read_sweep(), RunDir(run_dir).read_manifest())
        atomic_write_text(path, json.dumps(results, indent=2, allow_nan=False))
        return [path]
    from phasescope.rundir.owner import claim_out

    folder = Path(out) if out else Path(run_dir) / "export"
    if folder.exists() and not folder.is_dir():  # checked before the run is read: it may take minutes
        raise InputError(
            f"--out {folder} is a file, not a directory: --format {fmt} writes one file per table into a directory; "
            "pass a directory (default RUN/export), or --format lm-eval for one results file"
        )
    claim_out(folder, "phasescope export")  # a run's, a model's or a comparison's directory is never written over
    tables = load_run(run_dir)
    refuse_link(folder)  # a run directory from someone else must not send the tables elsewhere
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in tables.items():
        if name == "task_metrics" and frame.empty:
            continue  # not an lm-eval run: no task metrics, and no header-only file that suggests some
        path = folder / f"{name}.{fmt}"
        if fmt == "csv":
            atomic_write_text(path, frame.map(_as_text).to_csv(index=False))
        elif fmt == "jsonl":
            atomic_write_text(path, frame.to_json(orient="records", lines=True))
        else:
            try:
                atomic_write_bytes(path, frame.to_parquet(index=False))
            except ImportError:
                raise InputError("--format parquet needs pyarrow: pip install 'phasescope[export]'") from None
        paths.append(path)
    return paths


def lm_eval_results(records: list[Record], metrics: Metrics, spec: SavedSweep, manifest: dict | None = None) -> dict:
    """lm-eval's results layout: ``results[task][metric]`` (offset 0: lm-eval's own rendering,
    with ``METRIC_stderr,FILTER`` as lm-eval computes it), ``phase_results[task][phase][metric]``;
    ``METRIC_phase_range_raw_pp,FILTER`` is max - min over phases without the drift removed (the
    drift-adjusted gap is the run's, in metrics.json). ``configs``, ``versions``, ``date`` and the
    model come from spec.json and manifest.json (``date``: when the sweep started; None for runs
    made before it was recorded)."""
    manifest = manifest or {}
    per_task = metrics.task_metrics
    if not per_task:
        raise InputError("--format lm-eval: this run holds no lm-eval task metrics (sweep with --probe lm-eval:TASK)")
    results, phase_results = {}, {}
    for task, summaries in per_task.items():
        results[task] = {"alias": task}
        phase_results[task] = {}
        for metric, summary in summaries.items():
            name, _, filt = metric.partition(",")
            at_zero = [r.task_metrics[metric] for r in records if r.task == task and r.offset == 0]
            results[task][metric] = summary["offset_0"]
            results[task][f"{name}_stderr,{filt}"] = _stderr(at_zero)
            for p in summary["phases"]:
                row = phase_results[task].setdefault(str(p["phase"]), {})
                row[metric], row[f"{name}_ci95,{filt}"], row[f"{name}_n,{filt}"] = p["value"], p["ci"], p["contents"]
            results[task][f"{name}_phase_range_raw_pp,{filt}"] = summary["gap_raw_pp"]
    tasks = spec.probe.get("tasks") if isinstance(spec.probe.get("tasks"), dict) else {}
    return {
        "results": results,
        "phase_results": phase_results,
        "configs": {t: _task_config(t, tasks.get(t, {})) for t in per_task},
        # a YAML task without metadata.version is version "Yaml" in lm-eval's own results (ConfigurableTask)
        "versions": {t: _version(tasks.get(t, {})) for t in per_task},
        "n-shot": {t: tasks.get(t, {}).get("num_fewshot") for t in per_task},
        "higher_is_better": {t: tasks.get(t, {}).get("higher_is_better", {}) for t in per_task},
        "n-samples": {
            t: {"original": tasks.get(t, {}).get("documents"), "effective": _docs(records, t)} for t in per_task
        },
        "config": {
            "model": spec.model,
            "model_args": None,
            "phasescope": {"step": metrics.step, "offsets": metrics.offsets, "command": manifest.get("command")},
        },
        "model_name": spec.model,
        "date": manifest.get("created"),
        "lm_eval_version": (manifest.get("versions") or {}).get("lm_eval"),
        "transformers_version": (manifest.get("versions") or {}).get("transformers"),
        "git_hash": manifest.get("git_sha"),
    }


def _version(task: dict):
    return task.get("version") if task.get("version") is not None else ("Yaml" if task else None)


def _task_config(name: str, task: dict) -> dict:
    """The part of lm-eval's task config that spec.json records (lm-eval's ``configs[task]`` keys)."""
    return {
        "task": name,
        "output_type": task.get("output_type"),
        "num_fewshot": task.get("num_fewshot"),
        "metric_list": [{"metric": m} for m in task.get("metrics", [])],
        "filter_list": [{"name": f} for f in task.get("filters", [])],
        "metadata": {"version": _version(task)},
    }


def _docs(records: list[Record], task: str) -> int:
    return len({r.content_id for r in records if r.task == task})


def _stderr(values: list[float]) -> float | None:
    """lm-eval's ``mean_stderr``: sample standard deviation / sqrt(n)."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))


def _our_lm_eval_file(path: Path) -> bool:
    """Whether ``path`` is an lm-eval results file this function wrote (so it may be replaced)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "phase_results" in data
