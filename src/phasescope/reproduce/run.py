"""``phasescope reproduce``: sweep and analyze the reproduction matrix, judge every claim.

By default the checkpoints shipped in ``assets/reproduce`` (each ``RECIPE-sSEED`` directory with
its manifest: command, seed, commit, final evaluation); ``--retrain`` trains the matrix first
into ``OUT/models`` (one process per run, ``--jobs`` at a time, resumable). Every sweep is a
resumable run directory under ``OUT/runs``, so an interrupted reproduction continues where it
stopped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from phasescope.errors import InputError
from phasescope.reproduce.matrix import (
    ASSETS,
    DEPTH_VARIANTS,
    DEPTHS,
    LEARNED_BAND,
    MATRIX,
    THRESHOLD_CONTEXTS,
    THRESHOLD_VARIANTS,
    Entry,
    checkpoint_dir,
    final_eval,
    learned,
)
from phasescope.rundir import RunDir
from phasescope.rundir.files import read_json

OFFSETS = range(24)  # 4 periods of s = 6, 3 of s = 8
FULL_ATTENTION_STEP = 4  # a full-attention control is read at the step of the models it controls


def geometry(model_dir: Path, entry: Entry) -> dict:
    """step, window, local, pooler, rope of a checkpoint (None step: full attention)."""
    if entry.hf:
        meta = read_json(model_dir / "phasescope.json", "phasescope metadata").get("compression", {})
        return {**{k: meta.get(k) for k in ("step", "window", "local")}, "pooler": "channel_gate (V4)", "rope": True}
    config = read_json(model_dir / "model_config.json", "model config")
    compressed = [layer for layer in config["layers"] if layer.get("kind") != "full"]
    if not compressed:
        return {"step": None, "window": None, "local": None, "pooler": "full attention", "rope": config.get("rope")}
    first = compressed[0]
    rope = bool(config.get("rope", True)) and first.get("rope") != "none"
    return {k: first.get(k) for k in ("step", "window", "local", "pooler")} | {"rope": rope}


class Variant(NamedTuple):
    """One sweep of a (recipe, seed): its kv gaps, phase ensemble, run-dir suffix, offsets, design,
    the needle's depth (None: the probe's default, 0.5) and the context length in tokens (None: a
    task row's length)."""

    kv_gaps: tuple[int, ...]
    ensemble: bool
    suffix: str
    offsets: tuple[int, ...]
    design: str = "shift-needle"
    depth: float | None = None
    context_tokens: int | None = None


VARIANTS = {
    "plain": Variant((0,), False, "", OFFSETS),
    "kv-gaps": Variant((0, 1), False, "-kvgaps", OFFSETS),
    "phase-ensemble": Variant((0,), True, "-ensemble", OFFSETS),
    # amendment 5: same vs split at two value phases (5e); step 8 over six windows (5f)
    "kv-gaps-012": Variant((0, 1, 2), False, "-kvgaps012", OFFSETS),
    "offsets-48": Variant((0,), False, "-o48", tuple(range(48))),
    # amendment 6: step 8 over six windows with the whole prompt moving (alignment without distance)
    "pad-prefix-48": Variant((0,), False, "-padprefix48", tuple(range(48)), "pad-prefix"),
    # amendment 7: the crossed design over as many windows as the step (7a, 7c); the needle's depth (7b)
    "crossed-24": Variant((0,), False, "-crossed24", OFFSETS, "crossed"),
    "crossed-64": Variant((0,), False, "-crossed64", tuple(range(64)), "crossed"),
    **{
        name: Variant((0,), False, f"-depth{d:g}", OFFSETS, depth=d)
        for d, name in zip(DEPTHS, DEPTH_VARIANTS, strict=True)
    },
    # amendment 10: the crossed design below and above the lightning indexer's threshold
    **{
        name: Variant((0,), False, f"-crossed-ctx{n}", OFFSETS, "crossed", context_tokens=n)
        for n, name in zip(THRESHOLD_CONTEXTS, THRESHOLD_VARIANTS, strict=True)
    },
}


def sweep_one(entry: Entry, seed: int, model_dir: Path, out: Path, variant: str, samples: int, resamples: int):
    import phasescope

    kv_gaps, ensemble, suffix, offsets, design, depth, context_tokens = VARIANTS[variant]
    run_dir = out / "runs" / f"{entry.recipe}-s{seed}{suffix}"
    geo = geometry(model_dir, entry)
    spec = f"hf:{model_dir}" if entry.hf else str(model_dir)
    step = geo["step"] or FULL_ATTENTION_STEP
    samples = entry.samples or samples
    task = probe_task(entry)
    placed = {} if depth is None else {"depth": depth}
    if context_tokens is not None:
        placed["context_tokens"] = context_tokens
    phasescope.sweep(
        spec,
        step=step,
        samples=samples,
        offsets=offsets,
        kv_gaps=kv_gaps,
        phase_ensemble=ensemble,
        design=design,
        task=task,
        out=run_dir,
        **placed,
        command=f"phasescope sweep --model {spec} --step {step} --samples {samples} --offsets 0:{len(offsets)} "
        f"--kv-gaps {','.join(map(str, kv_gaps))}"
        + (" --phase-ensemble" if ensemble else "")
        + (f" --design {design}" if design != "shift-needle" else "")
        + (f" --depth {depth:g}" if depth is not None else "")
        + (f" --context-tokens {context_tokens}" if context_tokens is not None else "")
        + f" --out {run_dir}"
        + (f"  # Python API only: task=get_recipe({entry.post_of!r}).task" if entry.post_of else ""),
    )
    metrics = phasescope.analyze(run_dir, n_resamples=resamples)
    result = row(entry, seed, model_dir, geo, step, metrics, run_dir, variant)
    if variant in ("kv-gaps", "kv-gaps-012"):
        result |= same_window_gap(run_dir, resamples)
        windows = metrics.windows or {}
        result["same_minus_split_pp"] = windows.get("same_minus_split_pp")
        result["same_minus_split_ci_pp"] = windows.get("ci_pp")
        result["discordant_phases"] = windows.get("discordant_phases")
    return result


def probe_task(entry: Entry):
    """The task a model is swept on: its own (None: read from its directory), except that a
    post-trained model is swept on its base recipe's task, so before and after share one probe."""
    if entry.post_of is None:
        return None
    from phasescope.train.recipes import get_recipe

    return get_recipe(entry.post_of).task


def row(entry: Entry, seed: int, model_dir: Path, geo: dict, step: int, m, run_dir: Path, variant: str):
    evaluation = final_eval(model_dir)
    if entry.post_of:  # its held-out evaluation is on the post-training rows: judged on the base task's sweep
        has_learned = LEARNED_BAND[0] <= m.overall_accuracy <= LEARNED_BAND[1]
    else:
        has_learned = learned(evaluation)
    return {
        "recipe": entry.recipe,
        "seed": seed,
        "variant": variant,
        "step": step,
        "window": geo["window"],
        "local": geo["local"],
        "pooler": geo["pooler"],
        "rope": geo["rope"],
        "eval_accuracy": None if evaluation is None else evaluation["eval_accuracy"],
        "learned": has_learned,
        "mean_accuracy": m.overall_accuracy,
        "gap_pp": m.gap_pp,
        "gap_ci_pp": m.gap_ci_pp,
        "gap_p": m.gap_p_value,
        "period": m.period.detected,
        "period_p": m.period.p_value,
        "period_kind": m.period.kind,
        "step_component_p": m.period.step_component_p,
        **margin_columns(m),
        "factors": factor_columns(m) if VARIANTS[variant].design == "crossed" else None,
        "forward_passes": step if variant == "phase-ensemble" else 1,
        "model": f"hf:{model_dir}" if entry.hf else str(model_dir),
        "run_dir": str(run_dir),
    }


def margin_columns(m) -> dict:
    """The phase statistics of the log-prob margin (amendment 4: step 2 at the ceiling)."""
    score = m.log_score
    if score is None:
        return {"margin_gap": None, "margin_gap_ci": None, "margin_period": None, "margin_period_p": None}
    return {
        "margin_gap": score.gap,
        "margin_gap_ci": score.gap_ci,
        "margin_period": score.period.detected,
        "margin_period_p": score.period.p_value,
        "margin_period_kind": score.period.kind,
        "margin_step_component_p": score.period.step_component_p,
    }


def factor_columns(m) -> dict:
    """Amendment 7a: each factor test's Holm-adjusted p (the verdict's family), raw p and size."""
    adjusted = m.verdict.adjusted_p if m.verdict else {}
    return {
        t["name"]: {
            "adjusted_p": adjusted.get(f"factor:{t['name']}"),
            "p": t.get("p_value"),
            "range_pp": t.get("range_pp"),
            "range_ci_pp": t.get("range_ci_pp"),
            "worst_phase": t.get("worst_phase"),
        }
        for t in (m.factors or {}).get("tests", [])
    }


def same_window_gap(run_dir: Path, resamples: int = 1000) -> dict:
    """The phase gap among records whose key and value share a compression window."""
    from phasescope.analysis.stats import analyze_records
    from phasescope.rundir.metrics import Metrics
    from phasescope.rundir.records import read_records

    records = [r for r in read_records(RunDir(run_dir).records).records if r.same_window]
    if not records:
        return {"same_window_gap_pp": None, "same_window_ci_pp": None, "same_window_p": None}
    m = Metrics.from_json(analyze_records(records, seed=0, n_resamples=resamples))
    present = sorted(m.phase_accuracy())
    return {
        "same_window_gap_pp": m.gap_pp,
        "same_window_ci_pp": m.gap_ci_pp,
        "same_window_p": m.gap_p_value,
        "same_window_phases": present,
    }


DEFAULT_SEEDS = 3  # seeds 0..2 of every recipe (more where amendment 5 added them)


def seeds_of(entry: Entry, seeds: int) -> range:
    """The seeds of ``entry`` a reproduction covers: 0..seeds-1 (at most ``max_seeds``); a recipe
    with more shipped seeds (``Entry.seeds``, amendment 5) gets all of them at the default."""
    if entry.seeds is not None and seeds == DEFAULT_SEEDS:
        return range(entry.seeds)
    return range(min(seeds, entry.max_seeds or seeds))


def held_out_of(entry: Entry, seeds: int) -> tuple[int, ...]:
    """Amendment 7's held-out seeds of ``entry``: swept in a full reproduction (the default seeds)
    for amendment 7 alone, never counted in the earlier rules' verdicts."""
    return entry.held_out_seeds if seeds == DEFAULT_SEEDS else ()


def all_seeds(entry: Entry, seeds: int) -> list[int]:
    return [*seeds_of(entry, seeds), *held_out_of(entry, seeds)]


def available(root: Path, matrix, seeds: int) -> list[tuple[Entry, int, Path | None]]:
    """(entry, seed, checkpoint dir or None) for the whole matrix."""
    out = []
    for entry in matrix:
        for seed in all_seeds(entry, seeds):
            path = checkpoint_dir(root, entry, seed)
            out.append((entry, seed, path if path.exists() else None))
    return out


def trained(target: Path) -> bool:
    return (target / "model.safetensors").exists() or (target / "hf" / "model.safetensors").exists()


def variants_of(entry: Entry, held_out: bool) -> list[str]:
    """The sweeps of one (recipe, seed): a held-out seed gets the plain sweep and amendment 7's."""
    variants = ["plain"]
    if not held_out:
        variants += ["kv-gaps"] * entry.same_window + ["phase-ensemble"] * entry.ensemble
        variants += list(entry.amendment5_variants) + list(entry.amendment10_variants)
    return variants + list(entry.amendment7_variants)


def sweep_matrix(root: Path, out: Path, matrix, seeds: int, samples: int, console, resamples: int) -> list[dict]:
    from rich.progress import track

    rows = []
    planned = available(root, [e for e in matrix if e.swept], seeds)
    missing = [f"{e.recipe}-s{s}" for e, s, p in planned if p is None]
    if len(missing) == len(planned):
        raise InputError(
            f"no checkpoint of the matrix under {root}: it needs RECIPE-sSEED directories (e.g. tiny-s4-s0) as "
            "written by `phasescope train ... --out DIR/RECIPE-sSEED` or experiments/ship_checkpoints.py; "
            "or run with --retrain"
        )
    if missing:
        console.print(f"no checkpoint for {len(missing)} of {len(planned)} (recipe, seed): {', '.join(missing)}")
    for entry, seed, model_dir in track(planned, description="sweeping the matrix", console=console):
        held_out = seed in held_out_of(entry, seeds)
        if model_dir is None:
            rows.append({"recipe": entry.recipe, "seed": seed, "variant": "plain", "learned": False, "missing": True,
                         "held_out": held_out})  # fmt: skip
            continue
        swept = [
            sweep_one(entry, seed, model_dir, out, v, samples, resamples) | {"held_out": held_out}
            for v in variants_of(entry, held_out)
        ]
        if entry.kv_ablation:
            from phasescope.reproduce.kv_ablation import kv_ablation

            swept[0]["kv"] = kv_ablation(entry, seed, model_dir, out)
        if entry.intervention:
            from phasescope.reproduce.intervention import intervention

            swept[0]["intervention"] = intervention(entry, seed, model_dir, out, swept[0]["kv"])
        rows += swept
    return rows


@dataclass
class Job:
    """One training process of --retrain: ``argv`` after ``python -m``, run once ``needs`` are trained."""

    target: Path
    argv: list[str]
    needs: tuple[Path, ...] = ()


def training_jobs(root: Path, matrix, seeds: int) -> list[Job]:
    """A job per (recipe, seed) not trained under ``root``. The matched control runs its two passes
    (reproduce/matched.py); a recipe that starts from another matrix recipe's weights (init_from)
    waits for that run of the same seed under ``root`` and starts from it."""
    from phasescope.reproduce.matched import RECIPE as MATCHED
    from phasescope.train.recipes import get_recipe

    planned = {(e.recipe, s) for e in matrix for s in all_seeds(e, seeds)}
    jobs = []
    for entry in matrix:
        for seed in all_seeds(entry, seeds):
            target = root / f"{entry.recipe}-s{seed}"
            if trained(target):
                continue
            if entry.recipe == MATCHED:
                jobs.append(Job(target, ["phasescope.reproduce.matched", "--seed", str(seed), "--out", str(target)]))
                continue
            argv = ["phasescope", "train", entry.recipe, "--set", "threads=1", "--set", f"seed={seed}"]
            source = get_recipe(entry.recipe).init_from
            needs = (root / f"{source}-s{seed}",) if (source, seed) in planned else ()  # else: the shipped one
            argv += ["--set", f"init_from={needs[0]}"] if needs else []
            argv += ["--out", str(target), "--no-progress"]
            argv += ["--resume"] if (target / "checkpoints" / "LATEST").exists() else []
            jobs.append(Job(target, argv, needs))
    return jobs


def train_matrix(root: Path, matrix, seeds: int, jobs: int, console) -> None:
    """Every missing (recipe, seed) trained in its own process, ``jobs`` at a time (one thread
    each); an interrupted run resumes from its last checkpoint."""
    todo = training_jobs(root, matrix, seeds)
    console.print(f"training {len(todo)} models, {jobs} at a time, into {root}")
    running: list[tuple[subprocess.Popen, Job, object]] = []  # process, job, its open log file
    failed: list[Path] = []
    while todo or running:
        for job in [j for j in todo if set(j.needs) & set(failed)]:
            todo.remove(job)  # what it starts from failed
            failed.append(job.target)
        ready = [j for j in todo if all(trained(n) for n in j.needs)]
        if not ready and not running and todo:
            missing = sorted({str(n) for j in todo for n in j.needs if not trained(n)})
            raise InputError(f"--retrain: {', '.join(missing)} must be trained first and is not in the matrix")
        while ready and len(running) < jobs:
            job = ready.pop(0)
            todo.remove(job)
            job.target.mkdir(parents=True, exist_ok=True)
            log = (job.target / "train_stdout.txt").open("a")
            console.print("python -m " + " ".join(job.argv))
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            proc = subprocess.Popen([sys.executable, "-m", *job.argv], stdout=log, stderr=log, env=env)
            running.append((proc, job, log))
        time.sleep(2)
        for proc, job, log in list(running):
            if proc.poll() is not None:
                running.remove((proc, job, log))
                log.close()
                if proc.returncode != 0:
                    failed.append(job.target)
    if failed:
        raise InputError(
            f"training failed for {', '.join(map(str, failed))}; see train_stdout.txt there (rerun to resume)"
        )


def run_reproduce(
    out: Path,
    *,
    retrain: bool = False,
    jobs: int = 1,
    seeds: int = DEFAULT_SEEDS,
    samples: int = 256,
    checkpoints: Path | None = None,
    matrix=MATRIX,
    console=None,
    resamples: int = 1000,
) -> dict:
    from rich.console import Console

    from phasescope.reproduce.amendment5 import judge_amendment5
    from phasescope.reproduce.amendment6 import judge_amendment6
    from phasescope.reproduce.amendment7 import judge_amendment7
    from phasescope.reproduce.amendment10 import judge_amendment10
    from phasescope.reproduce.extended import judge_extended
    from phasescope.reproduce.preferences import add_preference_rhos
    from phasescope.reproduce.results import write_results
    from phasescope.reproduce.verdicts import judge

    console = console or Console()
    if seeds < 1 or jobs < 1 or samples < 8:
        raise InputError("--seeds >= 1, --jobs >= 1 and --samples >= 8 are required")
    root = Path(checkpoints) if checkpoints else (out / "models" if retrain else ASSETS)
    if retrain:
        train_matrix(root, matrix, seeds, jobs, console)
    began = time.perf_counter()
    rows = sweep_matrix(root, out, matrix, seeds, samples, console, resamples)
    earlier = [r for r in rows if not r.get("held_out")]  # amendment 7's held-out seeds count for it alone
    with_preferences = {e.recipe for e in matrix if e.preferences}
    add_preference_rhos([r for r in earlier if r["recipe"] in with_preferences])
    verdicts = judge(earlier, matrix)
    extended = judge_extended(earlier, matrix) | {
        "amendment_5": judge_amendment5(earlier),
        "amendment_6": judge_amendment6(earlier),
        "amendment_7": judge_amendment7(rows),
        "amendment_10": judge_amendment10(earlier),
    }
    shown = "phasescope/assets/reproduce (shipped)" if root == ASSETS else str(root)  # no machine's path
    settings = {"checkpoints": shown, "samples": samples, "seeds": seeds}
    every_seed = judge(rows, matrix)  # issue #60: the same tests over every seed trained, beside the rules'
    write_results(out, rows, verdicts, matrix, settings, extended, every_seed)
    console.print(f"swept and analyzed in {time.perf_counter() - began:.0f} s")
    return {"rows": rows, "verdicts": verdicts, "extended": extended}
