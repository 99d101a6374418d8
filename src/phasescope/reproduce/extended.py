"""Verdicts for the rest of the study (issue #23), under the rules fixed before the runs
(docs/reproduction.md, "Pre-registered rules", A-E):

* ``post_training`` (A): per post-trained recipe, paired by seed with its base: Δgap with a t
  interval over seeds below 0, periodic at the step (the period rule) on every learned seed, and the headroom-normalised
  gap gap / (100 − accuracy %) falling on average;
* ``step2`` (B): periodic at the step (2) by the period rule on every learned seed of each step-2 recipe (the
  period claim's test, reproduce/verdicts.py); ``step2_gap`` beside it: gap(step 2) − gap(step 4),
  Welch over seeds;
* ``kv_specialization`` (C): a held-out KV-head contrast > 0 with Holm p < 0.05 on every learned
  seed; ``stagger_own_phases``: do staggered KV heads prefer the phases their own boundaries make easy;
* ``margin_period_verdict`` (B‴, amendment 4): the step-2 seeds above the learned band, period 2
  in the log-prob margin on every such seed;
* ``theory`` (D): T1 gap(tiny-s2) < gap(tiny-s4), T2 gap(tiny-s4-d64) < gap(tiny-s4), Welch;
* ``long_context`` (E): periodic at the step on every learned seed of ``tiny-s4-long``; ``long_gap`` beside
  it: gap(tiny-s4-long) − gap(tiny-s4), descriptive.

A seed counts when its model learned and its gap was reported (a statistic the analysis withheld
counts as no result); every verdict needs ``MIN_SEEDS`` such seeds on each side.
"""

from __future__ import annotations

from phasescope.reproduce.matrix import LEARNED_BAND
from phasescope.reproduce.verdicts import ALPHA, MIN_SEEDS, entry_verdict, periodic_at_step

STEP2_PAIRS = (("tiny-v4.1", "tiny-s4-channel"), ("hf-deepseek-v4-tiny-s2", "hf-deepseek-v4-tiny"))
THEORY = {
    "T1": ("tiny-s2", "tiny-s4", "a smaller step gives a smaller gap at head dim 16 (s = 2 vs s = 4)"),
    "T2": ("tiny-s4-d64", "tiny-s4", "more capacity gives a smaller gap at step 4 (head dim 64 vs 16)"),
    # amendment 1 (docs/reproduction.md): T1 on 512-token rows, where step 2 is below the ceiling
    "T1'": ("tiny-s2-512", "tiny-s4-512", "T1 on 512-token rows with 32 pairs (s = 2 vs s = 4, head dim 16)"),
    # amendment 2: T2 with a head-dim-64 model whose warm start learned (from tiny-full-d64)
    "T2'": ("tiny-s4-d64-init", "tiny-s4", "T2 with the head-dim-64 model started from a trained full-attention one"),
    # amendment 3: T1 on the 1,024-token task, where step 2 is below the ceiling
    "T1''": ("tiny-s2-long", "tiny-s4-long", "T1 on 1,024-token rows with 64 pairs (s = 2 vs s = 4, head dim 16)"),
}
STEP2_HARDER = ("tiny-v4.1-512", "tiny-s4-512")  # amendment 1: B' and its gap beside step 4
LONG_PAIR = ("tiny-s4-long", "tiny-s4")
STEP2_LONG = ("tiny-s2-long", "tiny-s4-long")  # amendment 3: B'' and its gap beside step 4
# amendment 4 (B‴): the step-2 recipes' seeds above the learned band, judged in the log-prob margin
STEP2_ALL = ("tiny-s2", "tiny-v4.1", "hf-deepseek-v4-tiny-s2", "tiny-s2-512", "tiny-v4.1-512", "tiny-s2-long")
MIN_DROP_PP = 5.0  # a KV head counts in the stagger question when its removal costs this much on average


def plain(rows: list[dict], recipe: str) -> list[dict]:
    return [r for r in rows if r["recipe"] == recipe and r.get("variant", "plain") == "plain" and not r.get("missing")]


def counted(rows: list[dict], recipe: str) -> list[dict]:
    return [r for r in plain(rows, recipe) if r.get("learned") and r.get("gap_pp") is not None]


def _interval(summary: dict) -> list[float] | None:
    return None if summary["ci_low"] is None else [summary["ci_low"], summary["ci_high"]]


def post_training(rows: list[dict], recipe: str, base: str) -> dict:
    from phasescope.analysis.intervals import t_summary

    after = {r["seed"]: r for r in counted(rows, recipe)}
    before = {r["seed"]: r for r in counted(rows, base)}
    seeds = sorted(set(after) & set(before))

    def headroom(r):  # gap per pp of headroom below 100%: stays put when a gap shrinks only by the ceiling
        return r["gap_pp"] / max(100 - 100 * r["mean_accuracy"], 1e-9)

    per_seed = [
        {
            "seed": s,
            "accuracy_before": 100 * before[s]["mean_accuracy"],
            "accuracy_after": 100 * after[s]["mean_accuracy"],
            "gap_before_pp": before[s]["gap_pp"],
            "gap_after_pp": after[s]["gap_pp"],
            "gap_after_ci_pp": after[s].get("gap_ci_pp"),
            "period_after": after[s].get("period"),
            "period_after_p": after[s].get("period_p"),
            "delta_gap_pp": after[s]["gap_pp"] - before[s]["gap_pp"],
            "delta_headroom_gap": headroom(after[s]) - headroom(before[s]),
        }
        for s in seeds
    ]
    delta = t_summary([p["delta_gap_pp"] for p in per_seed])
    headroom_delta = t_summary([p["delta_headroom_gap"] for p in per_seed])
    periodic = [periodic_at_step(after[s]) for s in seeds]  # None: the analysis withheld its p-value
    out = {
        "recipe": recipe,
        "base": base,
        "paired_seeds": len(seeds),
        "delta_gap_pp": delta["mean"],
        "delta_gap_ci_pp": _interval(delta),
        "delta_headroom_gap": headroom_delta["mean"],
        "period_kept_seeds": sum(p is True for p in periodic),
        "per_seed": per_seed,
    }
    if len(seeds) < MIN_SEEDS:
        return out | {"verdict": "inconclusive", "why": f"{len(seeds)} seeds where both models learned (needs 3)"}
    testable = [p for p in periodic if p is not None]
    if delta["mean"] >= 0 or (len(testable) == len(seeds) and not any(testable)):
        why = "the gap did not narrow (mean Δgap >= 0)" if delta["mean"] >= 0 else "periodic at the step on no seed"
        return out | {"verdict": "not reproduced", "why": why}
    narrowed = delta["ci_high"] is not None and delta["ci_high"] < 0
    kept = len(testable) == len(seeds) and all(testable)
    if narrowed and kept and headroom_delta["mean"] < 0:
        return out | {
            "verdict": "reproduced",
            "why": "Δgap interval below 0, period kept on every seed, headroom gap fell",
        }
    missing = [
        text
        for ok, text in (
            (narrowed, "Δgap interval reaches 0"),
            (kept, f"periodic at the step on {sum(testable)} of {len(seeds)} seeds ({len(testable)} testable)"),
            (headroom_delta["mean"] < 0, "the headroom-normalised gap did not fall (a ceiling effect)"),
        )
        if not ok
    ]
    return out | {"verdict": "inconclusive", "why": "; ".join(missing)}


def welch(rows: list[dict], recipe: str, other: str) -> dict:
    from phasescope.analysis.intervals import welch_difference

    a, b = counted(rows, recipe), counted(rows, other)
    d = welch_difference([r["gap_pp"] for r in a], [r["gap_pp"] for r in b])
    return {
        "recipe": recipe,
        "versus": other,
        "seeds": [len(a), len(b)],
        "gap_pp": [r["gap_pp"] for r in a],
        "versus_gap_pp": [r["gap_pp"] for r in b],
        "diff_pp": d["diff"],
        "ci_pp": None if d["ci_low"] is None else [d["ci_low"], d["ci_high"]],
        "p": d["p_value"],
        "enough_seeds": len(a) >= MIN_SEEDS and len(b) >= MIN_SEEDS,
    }


def step2_gap(rows: list[dict]) -> dict:
    pairs = [welch(rows, a, b) for a, b in STEP2_PAIRS]
    if not all(p["enough_seeds"] and p["ci_pp"] is not None for p in pairs):
        verdict = "inconclusive"
    elif all(p["ci_pp"][1] < 0 for p in pairs):
        verdict = "smaller"
    elif any(p["ci_pp"][0] > 0 for p in pairs):
        verdict = "larger"
    else:
        verdict = "inconclusive"
    return {"verdict": verdict, "pairs": pairs}


def theory(rows: list[dict]) -> dict:
    out = {}
    for name, (recipe, other, text) in THEORY.items():
        w = welch(rows, recipe, other)
        if not w["enough_seeds"] or w["diff_pp"] is None:
            verdict = "inconclusive"
        elif w["diff_pp"] >= 0:
            verdict = "refuted"
        elif w["ci_pp"] is not None and w["ci_pp"][1] < 0:
            verdict = "confirmed"
        else:
            verdict = "inconclusive"
        out[name] = {"prediction": text, "verdict": verdict, **w}
    return out


def seed_verdict(hits: list[bool]) -> str:
    """Reproduced when the test holds on every counted seed, not reproduced when on none,
    inconclusive otherwise or with fewer than MIN_SEEDS seeds."""
    if len(hits) < MIN_SEEDS:
        return "inconclusive"
    return "reproduced" if all(hits) else "not reproduced" if not any(hits) else "inconclusive"


def kv_specialization(rows: list[dict], recipes: list[str]) -> dict:
    entries = {}
    for recipe in recipes:
        seeds = [r for r in plain(rows, recipe) if r.get("learned") and r.get("kv") is not None]
        hits = [r["kv"]["specialized"] for r in seeds]
        verdict = seed_verdict(hits)
        entries[recipe] = {
            "verdict": verdict,
            "learned_seeds": len(seeds),
            "specialized_seeds": sum(hits),
            "per_seed": [{"seed": r["seed"], **r["kv"]} for r in seeds],
        }
    verdicts = [e["verdict"] for e in entries.values()]
    if any(v == "reproduced" for v in verdicts):
        overall = "reproduced"
    elif verdicts and all(v == "not reproduced" for v in verdicts):
        overall = "not reproduced"
    else:
        overall = "inconclusive"
    return {"verdict": overall, "entries": entries}


def stagger_own_phases(rows: list[dict], recipe: str = "tiny-s4-stagger") -> dict:
    """KV head j of a staggered model (4 KV heads, step s) compresses with align j*s/4; the phases
    its boundaries make easy are its own window phases 1 and 2 (the unstaggered model's best)."""
    from scipy.stats import binomtest

    heads = []
    for r in plain(rows, recipe):
        if not (r.get("learned") and r.get("kv")):
            continue
        step = r["step"]
        n_kv = 1 + max(h["kv_head"] for h in r["kv"]["heads"])
        for h in r["kv"]["heads"]:
            if h["mean_drop_pp"] is None or h["mean_drop_pp"] < MIN_DROP_PP or h["preferred_phase"] is None:
                continue
            align = h["kv_head"] * step // n_kv
            easy = sorted({(align + 1) % step, (align + 2) % step})
            heads.append(
                {
                    "seed": r["seed"],
                    **h,
                    "align": align,
                    "easy_phases": easy,
                    "prefers_easy": h["preferred_phase"] in easy,
                }
            )
    k, n = sum(h["prefers_easy"] for h in heads), len(heads)
    p = binomtest(k, n, 0.5, alternative="greater").pvalue if n else None
    if n == 0:
        answer = "inconclusive"
    elif p < ALPHA:
        answer = "yes"
    elif k <= n / 2:
        answer = "no"
    else:
        answer = "inconclusive"
    return {"answer": answer, "count": k, "of": n, "p": p, "heads": heads}


def period_verdict(rows: list[dict], recipes: tuple[str, ...], claim: str) -> dict:
    """The period claim's test (periodic at the step by the period rule on every learned seed) for each recipe;
    reproduced when every recipe is, not reproduced when any is not."""
    entries = {
        r: entry_verdict([x for x in rows if x["recipe"] == r and x.get("variant", "plain") == "plain"], "period")
        for r in recipes
    }
    verdicts = [e["verdict"] for e in entries.values()]
    if all(v == "reproduced" for v in verdicts):
        overall = "reproduced"
    elif any(v == "not reproduced" for v in verdicts):
        overall = "not reproduced"
    else:
        overall = "inconclusive"
    return {"claim": claim, "verdict": overall, "entries": entries}


def above_band(rows: list[dict], recipe: str) -> list[dict]:
    """The recipe's seeds whose held-out accuracy is above the learned band (the ceiling)."""
    return [r for r in plain(rows, recipe) if (r.get("eval_accuracy") or 0.0) > LEARNED_BAND[1]]


def margin_period_verdict(rows: list[dict], recipes: tuple[str, ...] = STEP2_ALL) -> dict:
    """B‴ (amendment 4): detected margin period = the step (2) with p < alpha on every seed above
    the band of each recipe (MIN_SEEDS needed); reproduced when every recipe with enough seeds is."""
    entries = {recipe: _margin_entry(above_band(rows, recipe)) for recipe in recipes}
    judged = [e["verdict"] for e in entries.values() if e["verdict"] != "inconclusive"]
    if not judged:
        overall = "inconclusive"
    else:
        overall = "reproduced" if all(v == "reproduced" for v in judged) else "not reproduced"
    claim = "B‴: at the ceiling, a step-2 compressor's log-prob margin has period 2"
    return {"claim": claim, "verdict": overall, "entries": entries}


def _margin_entry(seeds: list[dict]) -> dict:
    hits = [
        periodic_at_step(
            {
                "step": r["step"],
                "period": r.get("margin_period"),
                "period_p": r.get("margin_period_p"),
                "period_kind": r.get("margin_period_kind"),
                "step_component_p": r.get("margin_step_component_p"),
            }
        )
        is True
        for r in seeds
    ]
    if len(seeds) < MIN_SEEDS:
        verdict = "inconclusive"
    else:
        verdict = "reproduced" if all(hits) else "not reproduced"
    return {
        "verdict": verdict,
        "why": f"margin period 2 with p < {ALPHA} on {sum(hits)} of {len(seeds)} seeds above the band "
        f"(a verdict needs {MIN_SEEDS})",
        "eval_accuracy": [round(100 * r["eval_accuracy"], 1) for r in seeds],
        "margin_gap": [None if r.get("margin_gap") is None else round(r["margin_gap"], 3) for r in seeds],
        "margin_period": [r.get("margin_period") for r in seeds],
        "margin_period_p": [
            None if r.get("margin_period_p") is None else float(f"{r['margin_period_p']:.2g}") for r in seeds
        ],
    }


def _below_alpha(p: float | None) -> bool:
    return p is not None and p < ALPHA


def judge_extended(rows: list[dict], matrix) -> dict:
    post = {e.recipe: post_training(rows, e.recipe, e.post_of) for e in matrix if e.post_of}
    post_verdicts = [v["verdict"] for v in post.values()]
    if post_verdicts and all(v == "reproduced" for v in post_verdicts):
        post_overall = "reproduced"
    elif any(v == "not reproduced" for v in post_verdicts):
        post_overall = "not reproduced"
    else:
        post_overall = "inconclusive"
    return {
        "post_training": {"verdict": post_overall, "entries": post},
        "step2": period_verdict(rows, tuple(a for a, _ in STEP2_PAIRS), "a step-2 compressor makes the period 2"),
        "step2_gap": step2_gap(rows),
        "step2_512": period_verdict(
            rows, STEP2_HARDER[:1], "B': on 512-token rows a step-2 compressor makes the period 2"
        ),
        "step2_512_gap": welch(rows, *STEP2_HARDER),
        "step2_long": period_verdict(
            rows, STEP2_LONG[:1], "B'': on 1,024-token rows a step-2 compressor makes the period 2"
        ),
        "step2_long_gap": welch(rows, *STEP2_LONG),
        "step2_margin": margin_period_verdict(rows),
        "kv_specialization": kv_specialization(rows, [e.recipe for e in matrix if e.kv_ablation]),
        "stagger_own_phases": stagger_own_phases(rows),
        "theory": theory(rows),
        "long_context": period_verdict(rows, LONG_PAIR[:1], "in 1,024-token rows with 64 pairs the period is the step"),
        "long_gap": welch(rows, *LONG_PAIR),
    }
