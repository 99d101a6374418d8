"""``lm-eval:TASK[,TASK...]``: lm-evaluation-harness tasks, phase-aware.

The tasks are built by lm-eval's own ``TaskManager`` (``--include-path DIR`` adds local YAML
tasks, searched first), and every document is taken exactly as lm-eval renders it: lm-eval
builds its requests (``doc_to_text``, ``doc_to_choice``, ``doc_to_target``,
``target_delimiter``, ``description``, few-shot examples with its seed 1234) and they are
tokenized as lm-eval's ``hf`` model does (``tokenizer.encode`` with the tokenizer's own special
tokens; trailing spaces of the context moved into the continuation; each continuation is
``encode(context + continuation)`` after ``len(encode(context))`` tokens)::

    [tokenizer's specials] [padding: d tokens] <lm-eval's context> -> continuation(s)
                                                                   ^ answer_pos = anchor

Offset 0 is lm-eval's own rendering, token for token; offset d adds padding of exactly d
tokens, measured (``probes.padding``), before the context. Documents differ in length, so an
offset is not one phase across documents: each record carries its answer's own phase.

Scoring, as lm-eval defines it:

* ``multiple_choice``: one candidate per choice, scored by its log-prob (rule "choice");
* ``loglikelihood``: one continuation, right when greedy decoding reproduces it;
* ``generate_until``: greedy generation (its ``until``, ``max_gen_toks``, the EOS token), then
  the task's own filters and metrics; the target is also scored by its log-prob.

Each record gets ``task``, ``doc_id`` and ``task_metrics`` (``{"acc,none": 1.0, ...}``, keys as
in lm-eval's results) computed by the task's own ``process_results``; ``correct`` is its first
metric. ``loglikelihood_rolling`` (perplexity), several contexts per document (e.g.
winogrande), images/audio and sampled generation are refused with the reason.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from phasescope.errors import InputError
from phasescope.probes.base import Probe, ProbeContext, ProbeError, ProbeItem
from phasescope.probes.options import ProbeOptions, filler_option, option
from phasescope.probes.padding import AnswerPlacer, Placement
from phasescope.probes.padding_completion import decoder, encoder
from phasescope.probes.prompts import FILLERS

ARGUMENT = "TASK,..."  # one task or several, comma-separated
SUMMARY = "lm-evaluation-harness tasks as lm-eval renders them, padded so the answer takes every phase"
FEWSHOT_SEED = 1234  # lm-eval's default fewshot_random_seed
SUPPORTED = ("multiple_choice", "loglikelihood", "generate_until")


@dataclass(frozen=True)
class Generate:
    """Greedy generation after the prompt (run.generation): at most ``max_tokens`` tokens,
    stopping at ``eos_id`` or once the decoded continuation holds one of ``stop``."""

    max_tokens: int
    stop: tuple[str, ...]
    eos_id: int | None
    decode: object  # ids -> text (special tokens skipped, as lm-eval's tok_decode)

    def done(self, generated: list[int]) -> bool:
        if self.eos_id is not None and generated and generated[-1] == self.eos_id:
            return True
        text = self.decode(generated)
        return any(s and s in text for s in self.stop)


@dataclass
class Document:
    """One lm-eval document: its task, its requests (Instances) and what the probe renders."""

    task: object  # lm_eval ConfigurableTask
    instances: list  # lm_eval Instances, in idx order
    context: str  # lm-eval's context, trailing whitespace removed (it goes into each continuation)
    continuations: dict[str, str]  # candidate name -> continuation text
    target: str  # name of the right candidate


def load_tasks(names: list[str], include_path: str | None) -> dict:
    """lm-eval's tasks by name (groups expand to their tasks), from ``include_path`` first."""
    logging.getLogger("lm_eval").setLevel(logging.WARNING)
    try:
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise ProbeError("--probe lm-eval: needs lm-evaluation-harness: pip install 'phasescope[lm-eval]'") from None
    if include_path is not None and not Path(include_path).is_dir():
        raise ProbeError(f"--include-path {include_path}: no such directory (a directory of lm-eval task YAML files)")
    local = TaskManager(include_path=include_path, include_defaults=False) if include_path else None
    manager = local if local and all(n in local.all_tasks for n in names) else TaskManager(include_path=include_path)
    unknown = [n for n in names if n not in manager.all_tasks]
    if unknown:
        where = f" (in {include_path} or lm-eval's own tasks)" if include_path else " (lm-eval's own tasks)"
        raise ProbeError(
            f"lm-eval task(s) {unknown} not found{where}; list them with `lm_eval ls tasks`, or pass --include-path "
            "DIR holding your task's YAML"
        )
    try:
        with quiet_bars():
            return manager.load([_with_local_files(manager, name) for name in names])["tasks"]
    except Exception as err:  # a task lm-eval cannot build (its dataset, its YAML): say so, no traceback
        raise ProbeError(f"lm-eval could not build {names}: {type(err).__name__}: {err}") from None


def _with_local_files(manager, name: str):
    """The task's name, or its whole config with its local ``data_files`` found beside its YAML.
    datasets reads a relative ``data_files`` path from the working directory, so a task YAML that
    names its own data failed from any other directory; a path missing there is read beside the YAML
    or from the nearest folder above it that holds it (a path that exists from the working directory
    is left as lm-eval reads it)."""
    entry = manager.task_index.get(name)
    yaml_path = getattr(entry, "yaml_path", None)
    if yaml_path is None or getattr(getattr(entry, "kind", None), "name", "") != "TASK":
        return name
    from lm_eval.tasks._yaml_loader import load_yaml  # lm-eval 0.4.13 (pinned by the extra)

    config = load_yaml(yaml_path, resolve_func=True)
    kwargs = dict(config.get("dataset_kwargs") or {})
    files = kwargs.get("data_files")
    found = _beside(files, Path(yaml_path).parent)
    if found == files:
        return name
    return {**config, "dataset_kwargs": kwargs | {"data_files": found}}


def _beside(files, directory: Path):
    """``data_files`` (a path, a list, or a split -> path(s) dict) with each relative path that does
    not exist from the working directory but does beside the YAML (or above it) made absolute."""
    if isinstance(files, dict):
        return {split: _beside(paths, directory) for split, paths in files.items()}
    if isinstance(files, list):
        return [_beside(path, directory) for path in files]
    if not isinstance(files, str) or "://" in files or Path(files).is_absolute() or Path(files).exists():
        return files
    for folder in (directory, *directory.parents):  # beside the YAML, or from a folder above it (a repository's root)
        if (folder / files).exists():
            return str((folder / files).resolve())
    return files


@contextlib.contextmanager
def quiet_bars():
    """datasets' and lm-eval's progress bars off while tasks load and render (a sweep draws its
    own; theirs littered its output with "Generating test split" and a bar per task)."""
    import datasets
    import lm_eval.api.task as task_module

    was_on, bar = datasets.is_progress_bar_enabled(), task_module.tqdm
    datasets.disable_progress_bars()
    task_module.tqdm = lambda iterable, *args, **kwargs: iterable
    try:
        yield
    finally:
        task_module.tqdm = bar
        if was_on:
            datasets.enable_progress_bars()


def documents(task) -> list[Document]:
    """Every document of ``task`` as lm-eval renders it (its own requests)."""
    name = task.config.task
    kind = task.OUTPUT_TYPE
    if kind not in SUPPORTED:
        raise ProbeError(
            f"lm-eval task {name}: output_type {kind} is not supported: a {kind} task scores whole texts, with no "
            f"answer position to move through the phases (supported: {', '.join(SUPPORTED)})"
        )
    if getattr(task, "multiple_input", False):
        raise ProbeError(
            f"lm-eval task {name}: one context per choice (doc_to_text gives a list) is not supported: the answer "
            "position would differ between the choices"
        )
    if task.config.doc_to_image or task.config.doc_to_audio:
        raise ProbeError(f"lm-eval task {name}: images and audio are not supported (text tasks only)")
    if kind == "generate_until" and (task.config.generation_kwargs or {}).get("do_sample"):
        raise ProbeError(f"lm-eval task {name}: it samples (do_sample: true); phasescope scores greedy generation")
    if task.get_config("num_fewshot") is None:  # as lm_eval.simple_evaluate
        task.set_config(key="num_fewshot", value=0)
    task.set_fewshot_seed(seed=FEWSHOT_SEED)
    with quiet_bars():
        task.build_all_requests(rank=0, world_size=1)
    by_doc: dict[int, list] = {}
    for inst in task.instances:
        by_doc.setdefault(inst.doc_id, []).append(inst)
    return [_document(task, sorted(group, key=lambda i: i.idx)) for _, group in sorted(by_doc.items())]


def _document(task, instances: list) -> Document:
    name, kind = task.config.task, task.OUTPUT_TYPE
    where = f"lm-eval task {name} document {instances[0].doc_id}"
    contexts = {inst.args[0] for inst in instances}
    if len(contexts) != 1 or not isinstance(instances[0].args[0], str):
        raise ProbeError(f"{where}: its requests do not share one text context; not supported")
    context = instances[0].args[0]
    if not context:
        raise ProbeError(f"{where}: the context is empty (nothing to pad before the answer); not supported")
    moved = context[len(context.rstrip()) :]  # lm-eval moves trailing spaces into the continuation
    base = context[: len(context) - len(moved)] if moved else context
    if kind == "multiple_choice":
        if "acc_mutual_info" in task._metric_fn_list:
            raise ProbeError(f"{where}: acc_mutual_info needs unconditional log-probs; not supported")
        continuations = {str(i): moved + inst.args[1] for i, inst in enumerate(instances)}
        gold = task.doc_to_target(instances[0].doc)
        if isinstance(gold, str):
            gold = task.doc_to_choice(instances[0].doc).index(gold)
        if not isinstance(gold, int) or not 0 <= gold < len(instances):
            raise ProbeError(f"{where}: its target {gold!r} is not one choice (several targets are not supported)")
        return Document(task, instances, base, continuations, str(gold))
    if kind == "loglikelihood":
        return Document(task, instances, base, {"target": moved + instances[0].args[1]}, "target")
    target = task.doc_to_target(instances[0].doc)
    if task.config.doc_to_choice is not None:
        target = task.doc_to_choice(instances[0].doc)[target]
    target = target[0] if isinstance(target, list) else target
    return Document(task, instances, context, {"target": task.config.target_delimiter + str(target)}, "target")


class LMEvalProbe(Probe):
    name = "lm-eval"
    summary = SUMMARY
    contents_by_sample = False  # documents, numbered task by task

    def __init__(self, tasks: dict, tokenizer, step: int, align: int, include_path=None, filler=None, max_len=None):
        self.tasks, self.include_path, self.filler, self.max_len = tasks, include_path, filler, max_len
        self.tokenizer, self.step, self.align = tokenizer, step, align
        self.encode, self.decode = encoder(tokenizer), decoder(tokenizer)
        self.docs = [doc for task in tasks.values() for doc in documents(task)]
        self.fillers: list[str] = []

    def default_samples(self) -> int:
        return len(self.docs)

    def spec(self) -> dict:
        tasks = {}
        for name, task in self.tasks.items():
            tasks[name] = {
                "output_type": task.OUTPUT_TYPE,
                "documents": sum(d.task is task for d in self.docs),
                "num_fewshot": task.get_config("num_fewshot"),
                "version": (task.config.metadata or {}).get("version"),
                "metrics": list(task._metric_fn_list),
                "filters": [f.name for f in task._filters],
                "higher_is_better": {k: bool(v) for k, v in task.higher_is_better().items()},
            }
        return {
            "probe": "lm-eval",
            "tasks": tasks,
            "include_path": self.include_path,
            "fillers": sorted(set(self.fillers)),
            "offset_zero": "lm-eval's own rendering (no padding)",
        }

    def _check_every_task_reached(self, n_samples: int) -> None:
        """The first ``n_samples`` documents go task by task: a task named but left without a
        document would be dropped from the results without a word."""
        names = [task.config.task for task in self.tasks.values()]
        reached = {doc.task.config.task for doc in self.docs[:n_samples]}
        left_out = [name for name in names if name not in reached]
        if left_out:
            counts = ", ".join(f"{n} {sum(d.task.config.task == n for d in self.docs)}" for n in names)
            first = len(self.docs) - sum(d.task.config.task in left_out for d in self.docs) + 1
            raise ProbeError(
                f"--samples {n_samples} leaves task(s) {', '.join(left_out)} without a document: the first "
                f"{n_samples} documents are taken task by task in the order named ({counts} documents); pass "
                f"--samples {first} or more, or name fewer tasks"
            )

    def stream(self, offsets: list[int], n_samples: int, rng: np.random.Generator) -> Iterator[list[ProbeItem]]:
        """The first ``n_samples`` documents, task by task in the order named."""
        if n_samples > len(self.docs):
            raise ProbeError(
                f"{n_samples} content samples were asked but the lm-eval task(s) hold {len(self.docs)} documents; "
                f"pass --samples {len(self.docs)} or fewer (the default is all of them)"
            )
        self._check_every_task_reached(n_samples)
        if 0 not in offsets:
            raise ProbeError("--probe lm-eval: the offsets must include 0 (lm-eval's own rendering), e.g. 0:24")
        units = (self.filler,) if self.filler else FILLERS
        self.fillers = []
        for content_id, doc in enumerate(self.docs[:n_samples]):
            where = f"lm-eval task {doc.task.config.task} document {doc.instances[0].doc_id}"
            head = self._head(doc.context, where)
            lowest = len(head) + len(self.encode(doc.context))
            placer = AnswerPlacer(self.encode, self.decode, self.step, lowest % self.step, head, self.max_len)
            placed = placer.place("", doc.context, units, offsets, where)
            if placed.base != lowest:
                raise ProbeError(f"{where}: no padding keeps offset 0 as lm-eval renders it; pass another --filler")
            self.fillers.append(placed.unit)
            yield [self._item(doc, content_id, d, head, placed) for d in offsets]

    def _head(self, context: str, where: str) -> tuple[int, ...]:
        """The special tokens the tokenizer adds before a text (BOS, or nothing), as lm-eval's hf model."""
        plain, full = self.encode(context), self._encode_special(context)
        if full[len(full) - len(plain) :] != plain:
            raise ProbeError(f"{where}: the tokenizer adds special tokens after the text; not supported")
        return tuple(full[: len(full) - len(plain)])

    def _encode_special(self, text: str) -> list[int]:
        tok = self.tokenizer
        if hasattr(tok, "encode_batch") and not hasattr(tok, "convert_tokens_to_ids"):  # a tokenizers.Tokenizer
            return tok.encode(text).ids
        return list(tok.encode(text))

    def _item(self, doc: Document, content_id: int, d: int, head: tuple[int, ...], placed: Placement) -> ProbeItem:
        padding = placed.paddings[d]
        text = padding.text + doc.context
        prompt = list(head) + self.encode(text)
        candidates = {}
        for name, continuation in doc.continuations.items():  # lm-eval: encode(whole)[len(encode(context)):]
            candidates[name] = (list(head) + self.encode(text + continuation))[len(prompt) :]
            if not candidates[name]:
                raise ProbeError(f"candidate {name!r} of {doc.task.config.task} is empty after tokenization")
        kind = doc.task.OUTPUT_TYPE
        generate = self._generate(doc) if kind == "generate_until" else None
        return ProbeItem(
            content_id=content_id,
            offset=d,
            input_ids=prompt,
            candidates=candidates,
            target=doc.target,
            anchor_pos=len(prompt),
            answer_pos=len(prompt),
            rule="choice" if kind == "multiple_choice" else "greedy",
            padding=padding.record(),
            generate=generate,
            grade=Grader(doc, self._text, generate.stop if generate else ()),
        )

    def _text(self, ids: list[int]) -> str:
        """lm-eval's ``tok_decode``: special tokens skipped."""
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def _generate(self, doc: Document) -> Generate:
        from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs

        kwargs = normalize_gen_kwargs(dict(doc.instances[0].args[1]), 256)  # lm-eval's hf default max_gen_toks
        eos_id = getattr(self.tokenizer, "eos_token_id", None)
        eos = None if eos_id is None else self.tokenizer.decode([eos_id], skip_special_tokens=False)
        until = handle_stop_sequences(kwargs.get("until"), eos=eos)
        return Generate(int(kwargs["max_gen_toks"]), tuple(until), eos_id, self._text)


@dataclass
class Grader:
    """A scored record -> lm-eval's own metrics for its document (the task's filters and
    ``process_results``), as ``task_metrics`` keyed ``metric,filter``."""

    doc: Document
    text: object  # ids -> text, as lm-eval decodes a generation
    until: tuple[str, ...] = ()  # generate_until: the stop sequences (the task's, and the EOS text)

    def __call__(self, record, generated: list[int] | None = None) -> dict:
        from lm_eval.models.utils import postprocess_generated_text

        task, doc = self.doc.task, self.doc
        fields: dict = {"task": task.config.task, "doc_id": int(doc.instances[0].doc_id)}
        if task.OUTPUT_TYPE == "generate_until":
            text = postprocess_generated_text(self.text(generated or []), list(self.until), None)
            responses = [text]
            fields["generation"] = text
        elif task.OUTPUT_TYPE == "multiple_choice":
            responses = [(record.logprobs[str(i)], False) for i in range(len(doc.instances))]
        else:
            responses = [(record.logprobs["target"], bool(record.correct))]
        metrics = self._metrics(responses)
        fields["task_metrics"] = metrics
        if metrics:
            fields["correct"] = bool(next(iter(metrics.values())))
        return fields

    def _metrics(self, responses: list) -> dict:
        """The task's filters applied to fresh copies of its instances, then ``process_results``."""
        from copy import copy

        task, doc = self.doc.task, self.doc
        instances = []
        for inst, response in zip(doc.instances, responses, strict=True):
            fresh = copy(inst)
            fresh.resps, fresh.filtered_resps = [response], {}
            instances.append(fresh)
        metrics = {}
        for ensemble in task._filters:
            ensemble.apply(instances)
            values = task.process_results(instances[0].doc, [inst.filtered_resps[ensemble.name] for inst in instances])
            for metric, value in values.items():
                if isinstance(value, (bool, int, float, np.integer, np.floating)):
                    metrics[f"{metric},{ensemble.name}"] = float(value)
        return metrics


def build_lm_eval_probe(
    spec: str, tokenizer, step: int, align: int, include_path=None, filler=None, max_len=None
) -> LMEvalProbe:
    """``spec``: ``TASK[,TASK...]`` (what follows ``lm-eval:``); the one constructor of this probe."""
    names = [n.strip() for n in (spec or "").split(",") if n.strip()]
    if not names:
        raise ProbeError("--probe lm-eval:TASK[,TASK...]: name at least one task, e.g. lm-eval:arc_easy")
    if tokenizer is None:
        raise ProbeError("--probe lm-eval: needs a tokenizer (an hf: model, --tokenizer DIR, or tokenizer=...)")
    try:
        return LMEvalProbe(load_tasks(names, include_path), tokenizer, step, align, include_path, filler, max_len)
    except InputError:
        raise
    except (ValueError, KeyError, TypeError) as err:  # lm-eval's own complaint about a task or its documents
        raise ProbeError(f"lm-eval task(s) {names}: {type(err).__name__}: {err}") from None


def build(ctx: ProbeContext) -> LMEvalProbe:
    step, align = ctx.geometry.step, ctx.geometry.align
    include = ctx.spec.options.include_path
    return build_lm_eval_probe(
        ctx.spec.argument, ctx.need_tokenizer(), step, align, include, ctx.spec.options.filler, max_len=ctx.max_len
    )


@dataclass(frozen=True)
class Options(ProbeOptions):
    """lm-eval's `phasescope sweep` options (probes/options.py)."""

    filler: str | None = filler_option()
    include_path: str | None = option(
        None,
        "lm-eval:TASK: a directory of your own lm-eval task YAML files, searched before lm-eval's built-in "
        "tasks (datasets from local files: dataset_path json, data_files).",
        metavar="DIR",
    )
