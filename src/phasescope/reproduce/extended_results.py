"""RESULTS.md's section on the rest of the study (issue #23): the verdicts of reproduce/extended.py
with the numbers that decide them."""

from __future__ import annotations

from phasescope.phases import FACTORS
from phasescope.reproduce.amendment10 import CONTROL, INDEXER, REAL_THRESHOLDS
from phasescope.reproduce.matrix import THRESHOLD_CONTEXTS, THRESHOLD_VARIANTS
from phasescope.reproduce.verdicts import PERIOD_RULE


def _f(value, spec: str = ".1f") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_f(v, spec) for v in value) + "]"
    return format(value, spec) if isinstance(value, float) else str(value)


def _pp(value, ci=None, signed: bool = True) -> str:
    spec = "+.1f" if signed else ".1f"
    text = _f(value, spec)
    return text if ci is None else f"{text} {_f(ci, spec)}"


def post_lines(post: dict) -> list[str]:
    lines = [f"### post-training: **{post['verdict']}**", "_post-training narrows the gap and keeps the period_", ""]
    for recipe, e in post["entries"].items():
        lines.append(
            f"* `{recipe}` (from `{e['base']}`): {e['verdict']} — {e['why']}; Δgap "
            f"{_pp(e['delta_gap_pp'], e['delta_gap_ci_pp'])} pp (t interval over {e['paired_seeds']} paired seeds); "
            f"periodic at the step on {e['period_kept_seeds']} of {e['paired_seeds']}; headroom-normalised gap change "
            f"{_f(e['delta_headroom_gap'], '+.3f')}"
        )
        lines.append("")
        lines.append("  | seed | accuracy before → after % | gap before → after pp | Δgap pp | period after (p) |")
        lines.append("  | --- | --- | --- | --- | --- |")
        for p in e["per_seed"]:
            lines.append(
                f"  | {p['seed']} | {p['accuracy_before']:.1f} → {p['accuracy_after']:.1f} | "
                f"{p['gap_before_pp']:.1f} → {p['gap_after_pp']:.1f} {_f(p['gap_after_ci_pp'])} | "
                f"{p['delta_gap_pp']:+.1f} | {_f(p['period_after'])} ({_f(p['period_after_p'], '.3g')}) |"
            )
        lines.append("")
    return lines


def welch_line(w: dict) -> str:
    return (
        f"`{w['recipe']}` {_f(w['gap_pp'])} pp vs `{w['versus']}` {_f(w['versus_gap_pp'])} pp: difference "
        f"{_pp(w['diff_pp'], w['ci_pp'])} pp (Welch over {w['seeds'][0]} and {w['seeds'][1]} learned seeds, "
        f"p {_f(w['p'], '.2g')})"
    )


def kv_lines(kv: dict, own: dict) -> list[str]:
    lines = [
        f"### KV-head specialization: **{kv['verdict']}**",
        "_different KV heads serve different phases (held-out contrast > 0, Holm p < 0.05, on every learned seed)_",
        "",
    ]
    for recipe, e in kv["entries"].items():
        lines.append(
            f"* `{recipe}`: {e['verdict']} — specialized on {e['specialized_seeds']} of {e['learned_seeds']} "
            "learned seeds"
        )
        for seed in e["per_seed"]:
            contrasts = "; ".join(
                f"phase {c['phase']}: L{c['kv_heads'][0][0]}KV{c['kv_heads'][0][1]} "
                f"{_pp(c['contrast_pp'], c['ci_pp'])} (Holm {_f(c['p_holm'], '.2g')})"
                for c in seed["causal"]
            )
            flagged = [f"L{h['layer']}KV{h['kv_head']}" for h in seed["heads"] if h["specialized"]]
            lines.append(
                f"  * seed {seed['seed']}: held-out {contrasts}; KV heads passing Holm on the index: "
                f"{', '.join(flagged) or 'none'}"
            )
    lines += [
        "",
        f"Stagger: do staggered KV heads prefer the phases their own boundaries make easy? **{own['answer']}** — "
        f"{own['count']} of {own['of']} KV heads whose removal costs >= 5 pp prefer one of their own easy phases "
        f"(one-sided binomial p {_f(own['p'], '.2g')} against 1/2).",
        "",
    ]
    return lines


def period_lines(v: dict) -> list[str]:
    lines = [f"_{v['claim']}_", ""]
    for recipe, e in v["entries"].items():
        lines.append(
            f"* `{recipe}`: {e['verdict']} — {e['why']}; gap {e['gap_pp']} pp; mean accuracy {e['mean_accuracy']}%; "
            f"detected periods {e['period']}"
        )
    return lines + [""]


def margin_lines(v: dict | None) -> list[str]:
    """B‴ (amendment 4): the step-2 seeds at the ceiling, read in the log-prob margin."""
    if not v:
        return []
    lines = [f"### step 2 in the log-prob margin at the ceiling (B‴, amendment 4): **{v['verdict']}**", ""]
    lines += [f"_{v['claim']}_", ""]
    for recipe, e in v["entries"].items():
        lines.append(
            f"* `{recipe}`: {e['verdict']} — {e['why']}; held-out accuracy {e['eval_accuracy']}%; margin gap "
            f"{e['margin_gap']} nats; margin periods {e['margin_period']} (p {e['margin_period_p']})"
        )
    return lines + [""]


def amendment5_lines(a5: dict | None) -> list[str]:
    """Amendment 5: the claims judged on sweep accuracy, the control by equivalence, KV-head
    specialization on shared window boundaries."""
    if not a5:
        return []
    control, shared, built_in = a5["control"], a5["kv_shared"], a5["kv_built_in"]
    t1 = a5["theory"]["T1"]
    lines = [
        "## Amendment 5: every claim judged on what the sweep measures (issue #34)",
        "",
        "A seed counts when its *sweep* accuracy lies in the learned band (rule A's reading); the new seeds "
        "(tiny-v4.1 and tiny-s2 seeds 3-5, tiny-s4-kv4 seeds 3-4) were trained after the amendment's commit.",
        "",
        f"### step 2 on sweep accuracy (B, 5a): **{a5['step2']['verdict']}**",
        *period_lines(a5["step2"]),
        f"Step-2 gap next to step 4 (5a): **{a5['step2_gap']['verdict']}**",
        "",
        *[f"* {welch_line(w)}" for w in a5["step2_gap"]["pairs"]],
        "",
        f"### T1 on sweep accuracy (5a): **{t1['verdict']}**",
        "",
        f"* {t1['prediction']}: {welch_line(t1)}",
        "",
        f"### matched control by equivalence (5c): **{control['verdict']}**",
        "",
        f"* `tiny-full-matched`: {control['why']}; intervals {_f(control['gap_ci_pp'])} pp",
        "",
        f"### KV-head specialization on shared window boundaries (5d): **{shared['verdict']}**",
        "",
    ]
    for recipe, e in {**shared["entries"], **built_in["entries"]}.items():
        built = (
            " (built in: each KV head has its own boundaries; reported, not judged)"
            if recipe in built_in["entries"]
            else ""
        )
        lines.append(
            f"* `{recipe}`{built}: {e['verdict']} — specialized on {e['specialized_seeds']} of {e['learned_seeds']} "
            "counted seeds"
        )
    split = a5["same_vs_split"]
    lines += [
        "",
        *intervention_lines(a5["intervention"]),
        f"### same vs split at two value phases (5e): **{split['verdict']}**",
        "",
        f"* `tiny-s4` with `--kv-gaps 0,1,2`: {split['why']}; same - split {_f(split['same_minus_split_pp'])} pp, "
        f"intervals {_f(split['ci_pp'])}, discordant value phases {split['discordant_phases']}",
        "",
        f"### step 8 at 48 offsets (5f): **{a5['step8_48']['verdict']}**",
        *period_lines(a5["step8_48"]),
    ]
    return lines


def intervention_lines(iv: dict) -> list[str]:
    lines = [f"### the named KV heads hidden vs random sets (5d's intervention): **{iv['verdict']}**", ""]
    lines += [f"* `tiny-s4-kv4`: {iv['why']}"]
    for s in iv["per_seed"]:
        randoms = sorted(v for v in s["random_lowered_pp"] if v is not None)
        spread = f"{randoms[0]:+.1f} .. {randoms[-1]:+.1f}" if randoms else "withheld"
        lowered = "withheld" if s["named_lowered_pp"] is None else f"{s['named_lowered_pp']:+.1f}"
        gap = "withheld" if s["gap_unablated_pp"] is None else f"{s['gap_unablated_pp']:.1f}"
        withheld = len(s["random_lowered_pp"]) - len(randoms)
        if s["beaten"] is not None:
            beats = f"beats {s['beaten']} of {len(randoms)}"
        elif s["named_lowered_pp"] is None:
            beats = "no result (the gap with the named heads hidden was withheld)"
        else:
            others = sum(s["named_lowered_pp"] > v for v in randoms)
            beats = (
                f"no result: the gap was withheld for {withheld} random set(s); beats {others} of the {len(randoms)} "
                "others"
            )
        lines.append(
            f"  * seed {s['seed']}: gap {gap} pp on the held-out half; hiding {len(s['named'])} named KV heads "
            f"{s['named']} lowers it by {lowered} pp, random sets by {spread} pp; {beats}"
        )
    return lines + [""]


def extended_section(ext: dict) -> list[str]:
    lines = [
        "## The rest of the study (issue #23)",
        "",
        'Rules fixed before the runs: docs/reproduction.md, "Pre-registered rules" (A-E).',
        "",
        *post_lines(ext["post_training"]),
        f"### step 2: **{ext['step2']['verdict']}**",
        *period_lines(ext["step2"]),
        f"Step-2 gap next to step 4: **{ext['step2_gap']['verdict']}**",
        "",
        *[f"* {welch_line(w)}" for w in ext["step2_gap"]["pairs"]],
        "",
        f"### step 2 on 512-token rows (B', amendment 1): **{ext['step2_512']['verdict']}**",
        *period_lines(ext["step2_512"]),
        f"* gap beside step 4: {welch_line(ext['step2_512_gap'])}",
        "",
        f"### step 2 on 1,024-token rows (B'', amendment 3): **{ext['step2_long']['verdict']}**",
        *period_lines(ext["step2_long"]),
        f"* gap beside step 4: {welch_line(ext['step2_long_gap'])}",
        "",
        *margin_lines(ext.get("step2_margin")),
        *kv_lines(ext["kv_specialization"], ext["stagger_own_phases"]),
        "### Predictions of the gradient-flow theory",
        "",
        *[f"* **{name}: {t['verdict']}** — {t['prediction']}: {welch_line(t)}" for name, t in ext["theory"].items()],
        "",
        f"### long context: **{ext['long_context']['verdict']}**",
        *period_lines(ext["long_context"]),
        f"* {welch_line(ext['long_gap'])}",
        "",
        *amendment5_lines(ext.get("amendment_5")),
        *amendment6_lines(ext.get("amendment_6")),
        *amendment7_lines(ext.get("amendment_7")),
        *amendment10_lines(ext.get("amendment_10")),
    ]
    return lines


def amendment6_lines(a6: dict | None) -> list[str]:
    if not a6:
        return []
    lines = [
        "## Amendment 6: step 8, alignment or distance (issue #34)",
        "",
        "`tiny-s8` over offsets 0..47 with `--design pad-prefix` (the whole prompt moves: only the alignment "
        "changes) beside 5f's shift-needle sweep (the needle also moves towards the question).",
        "",
        f"### step 8 at constant distance (6a): **{a6['step8_pad_prefix']['verdict']}**",
        *period_lines(a6["step8_pad_prefix"]),
        "Per seed (6b: a multiple of the step with the needle moving; 6c: a divisor of it):",
        "",
    ]
    for s in a6["per_seed"]:
        shift, pad = s["shift_needle"], s["pad_prefix"]
        answer = (
            f"{s['question']}: **{s['reading']}**"
            if s["question"]
            else "shift-needle reads the step itself: neither question arises"
        )
        lines.append(
            f"* seed {s['seed']}: shift-needle {_period(shift)}, gap {_f(s['gap_shift_pp'])} pp; pad-prefix "
            f"{_period(pad)}, gap {_f(s['gap_pad_pp'])} pp — {answer}"
        )
    return lines + [""]


def _p(value) -> str:
    return "n/a" if value is None else f"{value:.3g}"


def _period(found: dict) -> str:
    if found["period"] is None:
        return f"no period (p {_p(found['p'])})"
    kind = {"step": "the step or a divisor", "multiple": "a multiple of the step"}.get(found["kind"], found["kind"])
    return f"period {found['period']} ({kind}, p {_p(found['p'])})"


REACH = (
    "Where this reaches: two-layer models of 128-token rows (0.1-1M parameters, minutes of CPU each); the study's "
    "models are 0.6B at long context. `phasescope train qwen3-0.6b-study --estimate` measures what one of those "
    "needs (docs/training.md, 'Qwen3-0.6B recipes'): a GPU cluster, not this machine."
)


def _factor_reading(f: dict) -> str:
    seeds = f["seeds"]
    if not seeds:
        return "no counted seed"
    listed = ", ".join(
        f"s{s['seed']}{'*' if s['held_out'] else ''} {s['factor']}"
        + (f" {_pp(s['size_pp'], s['size_ci_pp'], signed=False)}" if s["size_pp"] is not None else "")
        for s in seeds
    )
    if f["reading"] in FACTORS:
        head = f"the effect follows {FACTORS[f['reading']].words} ({len(seeds)} of {len(seeds)} seeds, mean size "
        head += f"{_f(f['mean_size_pp'])} pp)"
    elif f["reading"] == "none":
        head = f"no factor's phase shows an effect on any of the {len(seeds)} seeds"
    elif f["reading"] == "not tested":
        head = f"the factors were not tested on any of the {len(seeds)} seeds (the analysis withheld them)"
    else:
        head = f"**{f['reading']}** over the {len(seeds)} seeds"
    bounds = _bounds_words(f.get("others") or {})
    return f"{head}{bounds}; per seed (max - min phase effect [95%]; * held out): {listed}"


def _bounds_words(others: dict) -> str:
    """'; the prompt end's effect is below 3.1 pp and the distance's cannot be excluded up to 7.8 pp
    (...)': each factor a reading does not name, by ``amendment7.other_bounds``."""
    parts = []
    for factor, b in others.items():
        who = f"the {FACTORS[factor].short}'s effect"
        if b["bound_pp"] is None:
            parts.append(f"{who} is not bounded (no interval on some seed)")
        elif b["below"]:
            parts.append(f"{who} is below {b['bound_pp']:.1f} pp")
        else:
            parts.append(f"{who} cannot be excluded up to {b['bound_pp']:.1f} pp")
    if not parts:
        return ""
    return (
        "; " + " and ".join(parts) + " (the largest over the seeds of each seed's own 95% upper end, a per-seed "
        "bound, not a joint one; 'below' when on every seed it lies under the named factor's own lower end)"
    )


def _depth_rows(table: list[dict]) -> list[str]:
    out = []
    for row in table:
        spread = "" if row["gap_sd_pp"] is None else f" ± {row['gap_sd_pp']:.1f}"
        which, withheld = ", ".join(map(str, row["at_step"])), ", ".join(map(str, row.get("withheld", [])))
        out.append(f"| {row['depth']:g} | {len(row['at_step'])} of {len(row['seeds'])} ({which}) | "
                   f"{withheld or '—'} | {_f(row['gap_mean_pp'])}{spread} |")  # fmt: skip
    return out


def amendment7_lines(a7: dict | None) -> list[str]:
    if not a7:
        return []
    lines = [
        "## Amendment 7: which phase the effects follow, read by factor (issue #47)",
        "",
        "Every seed with held-out accuracy at or above the floor, shipped and held out (12 on: 12 and 13 trained by "
        "the same recipes for this amendment, 14 and 15 for issue #60's audit), swept with `--design crossed` "
        "(offsets 0..23; 0..63 at step 8); each factor's test Holm-adjusted with the verdict's others at alpha = 0.05.",
        "",
        "### 7a: the factor each effect follows",
        "",
        *[f"* `{recipe}`: {_factor_reading(f)}" for recipe, f in a7["factors"].items()],
        "",
        f"### 7b: step 2 and the needle's depth: **{a7['depth']['reading']}**",
        "",
    ]
    for recipe in ("tiny-v4.1", "tiny-s4"):
        lines += [
            f"`{recipe}` (shift-needle, offsets 0..23; depth 0.5 is the plain sweep):",
            "",
            "| depth | seeds periodic at the step (which; the period rule) | withheld: drift not separable (which) | "
            "gap pp, mean ± sd over the others |",
            "| --- | --- | --- | --- |",
            *_depth_rows(a7["depth"][recipe]),
            "",
        ]
    lines += [
        f"### 7c: step 8 read by factor: {_factor_reading(a7['step8'])}",
        "",
        REACH,
        "",
    ]
    return lines


# ---- amendment 10 (issue #60): the lightning indexer's threshold ----


def _signed(value) -> str:
    return "n/a" if value is None else f"{value:+.1f}"


def amendment10_lines(a10: dict | None) -> list[str]:
    if not a10:
        return []
    below, above = THRESHOLD_CONTEXTS
    gap, period = a10["gap"], a10["period"]
    w = gap["welch"]
    interval = "" if w["ci_low"] is None else f" [{w['ci_low']:+.1f}, {w['ci_high']:+.1f}] (Welch p {w['p_value']:.2g})"
    lines = [
        "## Amendment 10: the lightning indexer's threshold (issue #60)",
        "",
        f"`{INDEXER}` keeps 16 compressed entries per query (step 4: sparse past 64 tokens; its indexer trained "
        f"by its KL to the main attention) and `{CONTROL}` keeps every entry; seeds 0-2 of each, swept with "
        f"`--design crossed` at `--context-tokens {below}` (below the threshold) and `{above}` (above). "
        + REAL_THRESHOLDS,
        "",
        f"### 10a: the period at both lengths ({PERIOD_RULE}): **{period['verdict']}**",
        "",
    ]
    for variant, outcomes in period["per_length"].items():
        said = ", ".join(f"s{s} {'yes' if o else 'withheld' if o is None else 'no'}" for s, o in outcomes.items())
        lines.append(f"* {variant}: {said or 'no counted seed'}")
    lines += [
        "",
        f"### 10b: the gap across the threshold: **{gap['reading']}**",
        "",
        f"gap above minus below, the indexer's minus the control's: {_signed(w['diff'])} pp{interval}, over "
        f"{len(gap['indexer_pp'])} and {len(gap['control_pp'])} counted seeds with a gap at both lengths"
        + ("" if gap["largest_pp"] is None else f"; a change up to {gap['largest_pp']:.1f} pp cannot be excluded"),
        "",
        "| recipe | seed | gap below pp [95%] | gap above pp [95%] | above − below pp | accuracy below → above % |",
        "| --- | --- | --- | --- | --- | --- |",
        *_table_rows(a10["seeds"]),
        "",
        "### 10c: the factor at each length",
        "",
    ]
    for variant in THRESHOLD_VARIANTS:
        lines.append(f"* `{INDEXER}` {variant}: {_factor_reading(a10['factor'][variant])}")
        lines.append(f"* `{CONTROL}` {variant}: {_factor_reading(a10['control_factor'][variant])}")
    return [*lines, "", "### What a sweep of a real V4 must cover", "", coverage(gap), ""]


def coverage(gap: dict) -> str:
    """The consequence amendment 10 wrote down before its runs, for the reading 10b gave."""
    both = (
        "sweep both sides of the threshold, read band by band: `--context-tokens 1536,3072` for V4 "
        "(2,048 tokens), and past 16,384 positions for V4.1 (`--context-tokens 12288,24576`)"
    )
    if gap["reading"] in ("widens", "narrows"):
        return f"The sparse indexer {gap['reading']} the gap here, so a sweep under the threshold misses it: {both}."
    if gap["reading"] == "no change shown":
        return (
            f"No change of the gap across the threshold was shown here (up to {gap['largest_pp']:.1f} pp cannot be "
            f"excluded), so a sweep under the threshold still measures the dense regime only: {both}."
        )
    return (
        f"Too few counted seeds to read the change; a sweep under the threshold measures the dense regime only: {both}."
    )


def _table_rows(table: list[dict]) -> list[str]:
    out = []
    for t in table:
        b, a = t["below_gap_pp"], t["above_gap_pp"]
        change = None if None in (a, b) else a - b
        below, above = _gap_with_interval(b, t["below_gap_ci_pp"]), _gap_with_interval(a, t["above_gap_ci_pp"])
        out.append(
            f"| `{t['recipe']}` | {t['seed']} | {below} | {above} | {_signed(change)} | "
            f"{100 * t['below_mean_accuracy']:.1f} → {100 * t['above_mean_accuracy']:.1f} |"
        )
    return out


def _gap_with_interval(gap: float | None, ci) -> str:
    if gap is None:
        return "withheld"
    return f"{gap:.1f}" + ("" if ci is None else f" [{ci[0]:.1f}, {ci[1]:.1f}]")
