"""``phasescope check``: a serving stack's regression check in one command (docs/serving.md, 'Catch
serving regressions in CI'): the same sweep of a reference and of the stack, the stack's prompts
sent again in a shuffled order, and the paired comparison as a gate (``phasescope.gate``)::

    OUT/reference/      the reference's sweep (--log-samples: every prompt as sent)
    OUT/stack/          the stack's sweep, in the sweep's order
    OUT/stack-repeat/   the stack's prompts sent again, in a seeded shuffled order (records carry
                        request_order): a run directory of the same sweep
    OUT/compare/        paired.json, gate.json, junit.xml, summary.md, reproducers/
    OUT/check.json      the gate, the commands, the request-state finding

**Request state.** A stack whose answer depends on what it was asked before (a prefix cache that
serves another request's state, a sliding-window ring left stale) answers an identical prompt
differently the second time. The repeat pass finds it: any record whose answer (correct, the
tokens, or the right answer's log-prob beyond the tolerance) differs between the passes. The
sweep's own order ties request order to the offsets (a content's offsets go one after another),
so such a fault reads as a phase there; in the shuffled pass it cannot, so when the passes differ
the gate compares the reference with the shuffled pass, and the departures follow no factor.

**Reference-free** (``reference=None``): the stack alone against the known right answers
(kv-retrieval's answer is in the prompt): every record is expected right.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path

import numpy as np

from phasescope.errors import InputError
from phasescope.rundir import CHECK, MANIFEST, SPEC, RunDir
from phasescope.rundir.files import atomic_write_text
from phasescope.rundir.records import read_records

# `phasescope check --preset canary`: small enough for minutes on one server, wide enough to catch each
# kind of fault: the crossed design (needle, prompt end and distance apart, the end over every residue of the
# longest period), answers as a deployed stack decodes them, two windows of the longest period
PRESETS = {
    "canary": {
        "probe": "kv-retrieval",
        "design": "crossed",
        "pair_format": "numbers",
        "answers": "generation",
        "samples": 24,
        "offsets": range(16),
    }
}
EVERY_FAULT = 1_000_000  # the stack sweep records every answer that breaks the protocol and goes on


def threshold_lengths(config: dict) -> list[int]:
    """Prompt lengths that straddle each length threshold a DeepSeek-V4-family config declares:
    the lightning indexer selects every compressed entry until the prompt passes ``index_topk`` x
    the CSA compress rate (512 x 4 = 2,048 for V4), and a candidate filter of ``blocks`` x
    ``block size`` positions (V4.1: 2,048 x 8 = 16,384) does nothing below it. For each threshold
    T: 3T/4 and 3T/2. [] when the config declares none."""
    thresholds = []
    rates = config.get("compress_rates") or {}
    rate = rates.get("compressed_sparse_attention") if isinstance(rates, dict) else None
    if config.get("index_topk") and rate:
        thresholds.append(int(config["index_topk"]) * int(rate))
    blocks = _first(config, ("index_candidate_blocks", "candidate_blocks", "num_candidate_blocks"))
    size = _first(config, ("index_block_size", "candidate_block_size", "block_size"))
    if blocks and size:
        thresholds.append(int(blocks) * int(size))
    return sorted({n for t in thresholds for n in (3 * t // 4, 3 * t // 2)})


def _first(config: dict, keys: tuple[str, ...]):
    return next((config[k] for k in keys if isinstance(config.get(k), int) and config[k] > 0), None)


def model_config(*places: str | None) -> dict:
    """The config.json of the first directory among ``places`` that has one ({} when none does):
    an ``hf:`` reference's, or the stack's ``--tokenizer`` directory (often the model's own)."""
    for place in places:
        if not place:
            continue
        path = Path(place.removeprefix("hf:")) / "config.json"
        if path.is_file():
            try:
                data = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            return data if isinstance(data, dict) else {}
    return {}


def only_for(model: str, options: dict) -> dict:
    """``options`` without the backend options ``model``'s backend does not read (the stack's
    --concurrency is not the reference's)."""
    from phasescope.backends import declared_options, options_class, spec_kind

    own = {f.name for f in fields(options_class(spec_kind(model)))}
    foreign = set(declared_options()) - own
    return {k: v for k, v in options.items() if k not in foreign}


def check(
    stack: str,
    out: str | Path,
    reference: str | None = None,
    *,
    repeats: bool = True,
    shuffle_seed: int = 0,
    thresholds=None,
    n_resamples: int = 2000,
    say=lambda _text: None,
    **options,
) -> dict:
    """The check (see the module docstring): the gate's verdict (``gate.decide``'s dict, with the
    runs' directories and the request-state finding); ``options``: `phasescope sweep`'s, applied to
    both sweeps alike (each backend takes its own)."""
    from phasescope.api import sweep
    from phasescope.gate import Thresholds
    from phasescope.results import gate
    from phasescope.rundir.owner import claim_out

    probe = options.get("probe", "kv-retrieval")
    if reference is None and probe != "kv-retrieval":
        raise InputError(
            f"a reference-free check compares the stack with answers known to be right, which {probe} does not "
            "give (a model may be wrong on them); use --probe kv-retrieval, whose answer is in the prompt, or pass "
            "--reference MODEL"
        )
    out = claim_out(out, "phasescope check", may_hold=("check",))
    thresholds = thresholds or Thresholds()
    if options.get("dry_run"):
        return {"plans": _plans(stack, reference, options)}
    runs = {"stack": out / "stack"}
    if reference is not None:
        runs = {"reference": out / "reference"} | runs
        say(f"sweeping the reference {reference} into {runs['reference']}")
        sweep(reference, out=runs["reference"], log_samples=True, **only_for(reference, options))
    say(f"sweeping the stack {stack} into {runs['stack']}")
    stack_options = only_for(stack, options)
    if "protocol_faults" not in options and "protocol_faults" in {f.name for f in fields(_options_class(stack))}:
        stack_options["protocol_faults"] = EVERY_FAULT  # every answer that breaks the protocol is a finding
    sweep(stack, out=runs["stack"], log_samples=True, **stack_options)
    state = None
    compared_stack = runs["stack"]
    if repeats:
        say(f"sending the stack's prompts again in a shuffled order (seed {shuffle_seed})")
        repeat = out / "stack-repeat"
        state = repeat_pass(stack, runs["stack"], repeat, shuffle_seed, thresholds.logprob_tol, stack_options)
        if state["differ"]:
            compared_stack = repeat  # request order is random there: it cannot pass for a phase
    dirs = [runs["reference"], compared_stack] if reference is not None else [compared_stack]
    labels = ["reference", "stack"] if reference is not None else ["stack"]
    comparison, decided = gate(
        dirs, out / "compare", labels, thresholds, n_resamples, reference_free=reference is None, repeats=state
    )
    decided["runs"] = {name: str(path) for name, path in runs.items()} | {"compared_stack": str(compared_stack)}
    decided["request_state"] = state
    atomic_write_text(out / CHECK, json.dumps(decided, indent=1, allow_nan=False) + "\n")
    return decided


def _plans(stack: str, reference: str | None, options: dict) -> dict:
    """--dry-run: each sweep's plan (records, requests, tokens), nothing sent or written."""
    from phasescope.api import sweep

    plans = {}
    if reference is not None:
        plans["reference"] = sweep(reference, **only_for(reference, options)).plan
    plans["stack"] = sweep(stack, **only_for(stack, options)).plan
    return plans


def repeat_pass(stack: str, first: Path, out: Path, seed: int, tolerance: float, options: dict) -> dict:
    """Every prompt of the stack's sweep ``first`` sent again in a seeded shuffled order, into the
    run directory ``out`` (the same spec and manifest; records in the order sent, each with its
    ``request_order``); then, record by record, where the two passes' answers differ."""
    from phasescope.api import resolve_model
    from phasescope.backends import backend_options, spec_kind
    from phasescope.backends.base import ScoringPlan, item_key
    from phasescope.run.orchestrator import ProtocolFindings, record_for

    source = RunDir(first)
    records = {r.key: r for r in read_records(source.records).records}
    samples = source.read_samples()
    keys = [k for k in records if k in samples]
    order = [keys[i] for i in np.random.default_rng(seed).permutation(len(keys))]
    saved = source.read_spec()
    backend_given = {k: v for k, v in options.items() if k in {f.name for f in fields(_options_class(stack))}}
    model = resolve_model(stack, backend_options(spec_kind(stack), backend_given))
    step, align, window = saved["step"], saved["align"], saved.get("window") or saved["step"]
    model.prepare(ScoringPlan(step, align, batch_size=1, prefix_reuse=False))
    out.mkdir(parents=True, exist_ok=True)
    for name in (SPEC, MANIFEST):
        if (source.path / name).exists():
            atomic_write_text(out / name, (source.path / name).read_text())
    target = RunDir(out)
    atomic_write_text(target.records, "")  # a check run again sends every prompt again
    faults = ProtocolFindings(model, out)
    faults.allowed = EVERY_FAULT
    decode = getattr(model.info.tokenizer, "decode", None)
    chunk = max(1, getattr(getattr(model, "options", None), "concurrency", 8))
    repeated, sent = {}, {key: i for i, key in enumerate(order)}
    for start in range(0, len(order), chunk):
        batch = [_item(records[k], samples[k]) for k in order[start : start + chunk]]
        items, results = faults.take(batch, model.score(batch))
        fresh = []
        for item, result in zip(items, results, strict=True):
            key = item_key(item)
            record = record_for(item, result, step, align, window, records[key].prompt_digest, decode)
            record = record.with_fields({"request_order": sent[key]})
            repeated[key] = record
            fresh.append(record)
        target.append("".join(r.line() for r in fresh))
    return _state(records, repeated, seed, tolerance)


def _options_class(stack: str):
    from phasescope.backends import options_class, spec_kind

    return options_class(spec_kind(stack))


def _item(record, sample: dict):
    """The probe item a record was scored on, from its sample (``--log-samples``)."""
    from phasescope.probes.base import ProbeItem

    return ProbeItem(
        content_id=record.content_id,
        offset=record.offset,
        input_ids=list(sample["prompt_ids"]),
        candidates={k: list(v) for k, v in sample["candidates"].items()},
        target=record.target,
        anchor_pos=record.anchor_pos,
        answer_pos=record.answer_pos,
        key_pos=record.key_pos,
        value_pos=record.value_pos,
        value_last=None
        if record.value_pos is None
        else record.value_pos + len(sample["candidates"][record.target]) - 1,
        variant=record.variant,
        rule=sample.get("rule", "greedy"),
        padding=record.padding,
        context_tokens=record.context_tokens,
    )


def _state(first: dict, again: dict, seed: int, tolerance: float) -> dict:
    """Where the two passes' answers differ, as the gate's request-state check reads it."""
    differ = []
    for key, r in again.items():
        a = first[key]
        moved = abs(a.logprob_target - r.logprob_target) > tolerance
        if a.correct != r.correct or (a.answer_ids and r.answer_ids and a.answer_ids != r.answer_ids) or moved:
            differ.append((key, a, r))
    right_then_wrong = sum(a.correct and not r.correct for _, a, r in differ)
    wrong_then_right = sum(r.correct and not a.correct for _, a, r in differ)
    sentence = (
        f"{right_then_wrong} right in the sweep's order and wrong when sent again, {wrong_then_right} the reverse, "
        f"{len(differ) - right_then_wrong - wrong_then_right} with other tokens or log-probs: the stack's answer "
        "depends on what it was asked before (cache state) or is nondeterministic"
        if differ
        else ""
    )
    return {
        "repeated": len(again),
        "differ": len(differ),
        "seed": seed,
        "examples": [list(key) for key, _, _ in differ[:10]],
        "sentence": sentence,
    }


__all__ = ["PRESETS", "check", "model_config", "only_for", "repeat_pass", "threshold_lengths"]
