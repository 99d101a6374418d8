"""The Python API: ``phasescope.sweep``, ``analyze``, ``report`` and ``compare``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from phasescope.backends import BackendOptions, LoadedModel, from_callable, load_spec
from phasescope.backends.native import from_decoder
from phasescope.data.retrieval import RetrievalTask
from phasescope.errors import InputError
from phasescope.model.decoder import Decoder
from phasescope.probes import PROBES, KVRetrievalProbe, KVRetrievalSpec, PaddingCompletionProbe, ProbeError
from phasescope.probes.chat import ChatTemplated
from phasescope.probes.kv_retrieval_text import TextKVRetrievalProbe, TextKVSpec
from phasescope.probes.padding_completion import CompletionSpec
from phasescope.probes.prompts import PromptsProbe
from phasescope.recordfile import read_records
from phasescope.run.orchestrator import SweepResult, run_sweep
from phasescope.runfiles import atomic_write_text, read_json

if TYPE_CHECKING:
    from phasescope.reporting.compare import ComparedRun


def resolve_model(model, options: BackendOptions | None = None) -> LoadedModel:
    """A spec string (see `phasescope backends`), a ``Decoder``, a transformers
    ``PreTrainedModel``, or any callable ``input_ids -> logits``."""
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, (str, Path)):
        return load_spec(str(model), options)
    if isinstance(model, Decoder):
        return from_decoder(model, description="in-memory phasescope Decoder", options=options)
    if hasattr(model, "config") and hasattr(model, "generate") and callable(model):
        from phasescope.backends.hf import from_pretrained_model

        return from_pretrained_model(model, options)
    if callable(model):
        return from_callable(model)
    raise InputError(
        f"model must be a spec string, a Decoder, a transformers model or a callable input_ids -> logits; "
        f"got {type(model)}"
    )


def build_probe(
    name: str,
    loaded: LoadedModel,
    *,
    design: str,
    task: RetrievalTask | None,
    tokenizer,
    completion,
    min_gap: int = 0,
    depth: float = 0.5,
    kv_gaps: tuple[int, ...] = (0,),
    chat_template: bool = False,
    context_tokens: int | None = None,
    pair_format: str = "auto",
    filler: str | None = None,
    step: int = 1,
    align: int = 0,
):
    """``min_gap``: tokens the needle must end before the question (raw window + one window)."""
    haystack = HaystackOptions(min_gap, depth, tuple(kv_gaps), context_tokens, pair_format, filler, step, align)
    probe = _text_or_native_probe(name, loaded, design, task, tokenizer, completion, haystack, chat_template)
    if not chat_template:
        return probe
    if isinstance(probe, KVRetrievalProbe):
        raise ProbeError("--chat-template needs a probe written in text (a model with a tokenizer)")
    return ChatTemplated(probe, tokenizer or loaded.tokenizer)


@dataclass(frozen=True)
class HaystackOptions:
    """kv-retrieval's haystack: placement beyond the raw window, renderings, size, pair format."""

    min_gap: int = 0
    depth: float = 0.5
    kv_gaps: tuple[int, ...] = (0,)
    context_tokens: int | None = None
    pair_format: str = "auto"
    filler: str | None = None  # prompts, text kv-retrieval: the padding unit (default: the first that pads cleanly)
    step: int = 1  # prompts: every prompt's answer is brought to phase 0 at offset 0 of this step
    align: int = 0


def _text_or_native_probe(name, loaded, design, task, tokenizer, completion, haystack, chat_template):
    if name not in PROBES and not name.startswith("prompts:"):
        raise ProbeError(f"unknown probe {name!r}; known: {', '.join(PROBES)}, prompts:FILE.jsonl")
    tokenizer = tokenizer or loaded.tokenizer
    bos_id = loaded.bos_id if loaded.bos_id is not None else getattr(tokenizer, "bos_token_id", None)
    bos_id = None if chat_template else bos_id  # the template brings its own start
    if name.startswith("prompts:"):
        if tokenizer is None:
            raise ProbeError("prompts: needs a tokenizer (an hf: model, --tokenizer DIR, or tokenizer=...)")
        path = name.removeprefix("prompts:")
        return PromptsProbe(path, tokenizer, bos_id, haystack.filler, haystack.step, haystack.align)
    if name == "kv-retrieval":
        task = task or (RetrievalTask.from_dict(loaded.task) if loaded.task else None)
        h = haystack
        if task is not None:
            if h.pair_format != "auto":
                raise ProbeError("--pair-format is for text probes; a native model's task fixes its keys and values")
            spec = KVRetrievalSpec(design=design, depth=h.depth, kv_gaps=h.kv_gaps, context_tokens=h.context_tokens)
            return KVRetrievalProbe(task, spec, min_gap=h.min_gap)
        if tokenizer is not None:
            spec = TextKVSpec(
                design=design,
                depth=h.depth,
                kv_gaps=h.kv_gaps,
                context_tokens=h.context_tokens,
                pair_format=h.pair_format,
                filler=h.filler,
            )
            return TextKVRetrievalProbe(tokenizer, spec, bos_id=bos_id, min_gap=h.min_gap)
        raise ProbeError(
            "kv-retrieval needs the model's task (native ids: pass task=RetrievalTask(...)) or a tokenizer"
        )
    if tokenizer is None:
        raise ProbeError("padding-completion needs a tokenizer (a HF model or tokenizer=...)")
    # completion None: the built-in code prompts
    return PaddingCompletionProbe(tokenizer, completion, bos_id, haystack.step, haystack.align)


def sweep(
    model,
    probe: str = "kv-retrieval",
    *,
    step: int | None = None,
    align: int | None = None,
    offsets=range(24),
    samples: int | None = None,
    design: str = "shift-needle",
    seed: int = 0,
    batch_size: int | None = None,
    out: str | Path | None = None,
    task: RetrievalTask | None = None,
    tokenizer=None,
    completion: CompletionSpec | list[CompletionSpec] | None = None,
    progress: bool = False,
    command: str | None = None,
    local: int | None = None,
    depth: float = 0.5,
    kv_gaps=(0,),
    window: int | None = None,
    options: BackendOptions | None = None,
    dry_run: bool = False,
    chat_template: bool = False,
    prefix_reuse: bool = True,
    context_tokens: int | None = None,
    pair_format: str = "auto",
    filler: str | None = None,
    phase_ensemble: bool = False,
    ensemble_pad_id: int | None = None,
) -> SweepResult:
    """Score every content sample at every offset; with ``out``, a resumable run directory.

    ``samples``: content samples (default: 50; padding-completion with ``completion`` given:
    every prompt given, one content each; without, the built-in code prompts).

    ``model``: a phasescope model directory, a ``Decoder``, or any callable
    ``input_ids (LongTensor[B,T]) -> logits (FloatTensor[B,T,V])``. ``step``/``align`` default
    to the model's own compression geometry, ``local`` (the raw window L) too: the needle is
    kept at least L + one compression window before the question. ``depth``: where the needle
    sits in the haystack (0 earliest, 1 latest). ``kv_gaps``: render each content with these
    numbers of tokens between key and value (e.g. (0, 1)) for the same-window analysis.
    ``window``: the compression window, for models whose config does not declare one;
    ``options``: dtype, device, trust_remote_code for the backend. ``dry_run``: build and check
    every item, return ``plan`` (records, passes or requests, tokens); nothing is scored or written.
    ``chat_template``: wrap text prompts in the tokenizer's chat template (its tokens count in
    every position). ``prefix_reuse``: read the prefix a content's offsets share once (run.prefix).
    ``context_tokens``: kv-retrieval fills this many tokens with pairs (NIAH at 128K: 131072);
    ``pair_format``: auto, words, numbers or codes (text probes; probes.pairs). ``probe="prompts:FILE.jsonl"``:
    your own prompts padded so the answer takes every phase (probes.prompts); ``filler``: the padding unit of
    prompts: and of the text kv-retrieval haystack (default: the first that pads cleanly, measured).
    ``phase_ensemble``: score every prompt at ``step`` pad lengths and average the predictions (a
    test-time remedy, run.ensemble); ``ensemble_pad_id``: the pad token (default: the model's filler).
    """
    loaded = resolve_model(model, options)
    step = step if step is not None else loaded.step
    if step is None:
        raise ProbeError(
            f"{loaded.description or 'the model'} declares no compression geometry in its config; pass the step "
            "(--step 4 for DeepSeek-V4, and --window/--local if they differ from the step / are known)"
        )
    align = align if align is not None else loaded.align
    if not 0 <= align < step:
        raise ProbeError(f"align={align} is invalid; allowed: 0 <= align < step ({step})")
    if window is None:
        window = (loaded.window or step) if loaded.step == step else step
    if window < step:
        raise ProbeError(f"window={window} is invalid; allowed: >= step ({step})")
    local = local if local is not None else loaded.local
    if local is not None and local < 0:
        raise ProbeError(f"local={local} is invalid; allowed: the raw window in tokens, >= 0")
    if phase_ensemble:
        from phasescope.run.ensemble import pad_token
        from phasescope.run.ensemble import phase_ensemble as ensemble

        pad_id = ensemble_pad_id if ensemble_pad_id is not None else pad_token(loaded, tokenizer, task)
        loaded = ensemble(loaded, step, pad_id)
    probe_obj = build_probe(
        probe,
        loaded,
        design=design,
        task=task,
        tokenizer=tokenizer,
        completion=completion,
        min_gap=0 if local is None else local + window,
        depth=depth,
        kv_gaps=tuple(kv_gaps),
        chat_template=chat_template,
        context_tokens=context_tokens,
        pair_format=pair_format,
        filler=filler,
        step=step,
        align=align,
    )
    return run_sweep(
        loaded,
        probe_obj,
        offsets=list(offsets),
        samples=samples if samples is not None else probe_obj.default_samples(),
        seed=seed,
        step=step,
        align=align,
        window=window,
        local=local,
        batch_size=batch_size,
        out=Path(out) if out is not None else None,
        progress=progress,
        command=command,
        dry_run=dry_run,
        prefix_reuse=prefix_reuse,
    )


def analyze(run_dir: str | Path, n_resamples: int = 2000) -> dict:
    """Statistics from ``records.jsonl`` alone; writes ``metrics.json`` (with the digest of the
    records it describes, so a report can tell when they changed)."""
    from phasescope.analysis.stats import analyze_records

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(f"{run_dir} is not a run directory (pass the --out directory of `phasescope sweep`)")
    path = run_dir / "records.jsonl"
    found = read_records(path)
    if not found.records:
        raise InputError(f"{path} holds no records; run `phasescope sweep ... --out {run_dir}` first")
    spec_path = run_dir / "spec.json"
    seed = read_json(spec_path, "sweep spec").get("seed", 0) if spec_path.exists() else 0
    if not isinstance(seed, int):
        raise InputError(f"{spec_path}: seed must be an integer, got {seed!r}")
    metrics = analyze_records(found.records, seed=seed, n_resamples=n_resamples)
    metrics["records_sha256"] = records_digest(path)
    if found.truncated_tail:
        metrics["records_note"] = "the last line of records.jsonl was cut short (an interrupted sweep) and is left out"
    # allow_nan=False: a statistic without data is null, never a NaN a reader would mistake for a number
    atomic_write_text(run_dir / "metrics.json", json.dumps(metrics, indent=2, sort_keys=True, allow_nan=False))
    return metrics


def records_digest(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


def current_metrics(run_dir: str | Path) -> dict:
    """The run's metrics.json, recomputed (``analyze``) when it is missing, unreadable or
    describes other records than those on disk (its records digest differs)."""
    run_dir = Path(run_dir)
    metrics_path = run_dir / "metrics.json"
    current = None
    if metrics_path.exists():
        try:
            current = read_json(metrics_path, "metrics")
        except InputError:
            current = None  # recomputed below from the records
    records = run_dir / "records.jsonl"
    if current is None or not records.exists() or current.get("records_sha256") != records_digest(records):
        return analyze(run_dir)
    return current


def report(run_dir: str | Path) -> Path:
    """Figures and a self-contained report.html. The report always describes the records on
    disk: metrics.json is recomputed when it is missing, unreadable or older than the records."""
    from phasescope.reporting.html import write_report

    current_metrics(run_dir)
    return write_report(Path(run_dir))


def compare(runs, out: str | Path, labels: list[str] | None = None) -> Path:
    """Several sweep run directories side by side in one self-contained ``out/compare.html``:
    per-phase accuracy table, accuracy over offsets overlaid, phase gaps as a forest plot.

    ``runs``: a list of ``phasescope sweep --out`` directories (meant for two or more; one
    works). Each run's metrics.json is recomputed first when it is missing or stale, as in
    ``report``. ``labels``: one name per run, in order (default: each directory's name)."""
    from phasescope.reporting.compare import write_compare

    return write_compare(compared_runs(runs, labels), Path(out))


def compared_runs(runs, labels: list[str] | None = None) -> list[ComparedRun]:
    """``ComparedRun`` (label, directory, current metrics) for each run; every path and label
    is checked before any metrics are recomputed, so a typo fails fast."""
    from phasescope.reporting.compare import ComparedRun, run_labels

    if isinstance(runs, (str, Path)) or isinstance(labels, str):
        raise InputError("runs and labels must be lists, e.g. compare(['runs/a', 'runs/b'], out, labels=['a', 'b'])")
    paths = [Path(r) for r in runs]
    if not paths:
        raise InputError("no run directory to compare; pass the --out directories of `phasescope sweep` (two or more)")
    names = run_labels(paths, labels)
    for path in paths:
        check_sweep_run_dir(path)
    return [ComparedRun(name, path, current_metrics(path)) for name, path in zip(names, paths, strict=True)]


def check_sweep_run_dir(path: Path) -> None:
    """InputError saying what is missing when ``path`` is not a directory written by a sweep."""
    make = f"make one with `phasescope sweep --model MODEL --out {path}`"
    if not path.exists():
        raise InputError(f"run directory {path} does not exist; {make}, or check the path")
    if not path.is_dir():
        raise InputError(f"{path} is a file, not a run directory; pass the --out directory of `phasescope sweep`")
    if not (path / "records.jsonl").exists():
        raise InputError(
            f"{path} is not a sweep run directory: it has no records.jsonl; pass the --out directory of "
            f"`phasescope sweep`, or {make}"
        )
