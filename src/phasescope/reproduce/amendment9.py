"""Amendment 9 (docs/reproduction.md, committed before any model it names was trained; issue #60
item 5): two thresholds set after the data they judged, tested on seeds trained after them.

* **9a** 5c's equivalence margin (``EQUIVALENCE_PP`` = 3 pp, committed after the matched control's
  intervals were in RESULTS.md): ``tiny-full-matched`` seeds 16, 17 and 18, judged by 5c's own
  code (``amendment5.control_equivalence``).
* **9b** 5a's switch to sweep accuracy (committed after period 2 was seen on all nine step-2
  seeds): ``tiny-v4.1`` seeds 16, 17 and 18, judged by 5a's own code (``period_verdict`` on
  ``on_sweep_accuracy`` rows: period 2 with p < alpha on every seed whose sweep accuracy is in the
  learned band).

* **9c** (added before its models were trained, after 9a and 9b's results): 5a's transformers half,
  ``hf-deepseek-v4-tiny-s2`` seeds 16, 17 and 18, judged by 5a's own rule.

Each seed swept as the rules sweep it (shift-needle, offsets 0..23, 256 contents). Run it (after
``bash experiments/train_issue60.sh`` with amendment 9's list, see docs/reproduction.md)::

    python -m phasescope.reproduce.amendment9 --models runs/issue60/models --out runs/issue60
"""

from __future__ import annotations

from pathlib import Path

from phasescope.reproduce.amendment5 import control_equivalence, on_sweep_accuracy
from phasescope.reproduce.extended import period_verdict

SEEDS = (16, 17, 18)
CONTROL, STEP2, HF_STEP2 = "tiny-full-matched", "tiny-v4.1", "hf-deepseek-v4-tiny-s2"


def judge_amendment9(rows: list[dict]) -> dict:
    swept = on_sweep_accuracy(rows)
    return {
        "control": control_equivalence(swept, CONTROL),
        "step2": period_verdict(swept, (STEP2,), "9b (5a on new seeds): a step-2 compressor makes the period 2"),
        "step2_hf": period_verdict(swept, (HF_STEP2,), "9c (5a's transformers half on new seeds)"),
    }


def markdown(result: dict, rows: list[dict]) -> str:
    lines = [f"#### 9a: the matched control by 5c's 3 pp margin, new seeds: **{result['control']['verdict']}**", ""]
    lines.append(f"{result['control']['why']}; per seed (gap pp [95%]):")
    for r in sorted((r for r in rows if r["recipe"] == CONTROL), key=lambda r: r["seed"]):
        lines.append(f"* seed {r['seed']}: {_gap(r)} (sweep accuracy {r['mean_accuracy']:.1%})")
    lines += ["", f"#### 9b: step 2 on sweep accuracy (5a), new seeds: **{result['step2']['verdict']}**", ""]
    lines += _period_lines(rows, STEP2)
    if any(r["recipe"] == HF_STEP2 for r in rows):
        verdict = result["step2_hf"]["verdict"]
        lines += ["", f"#### 9c: transformers' step 2 on sweep accuracy (5a), new seeds: **{verdict}**", ""]
        lines += _period_lines(rows, HF_STEP2)
    return "\n".join(lines) + "\n"


def _period_lines(rows: list[dict], recipe: str) -> list[str]:
    lines = []
    for r in sorted((r for r in rows if r["recipe"] == recipe), key=lambda r: r["seed"]):
        period = "none" if r.get("period") is None else r["period"]
        p = "withheld" if r.get("period_p") is None else f"p = {r['period_p']:.3g}"
        lines.append(
            f"* seed {r['seed']}: period {period} ({p}), gap {_gap(r)}, sweep accuracy {r['mean_accuracy']:.1%}"
        )
    return lines


def _gap(row: dict) -> str:
    if row.get("gap_pp") is None:
        return "withheld"
    ci = row.get("gap_ci_pp")
    return f"{row['gap_pp']:.1f}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")


def sweep_all(models: Path, out: Path, samples: int, resamples: int) -> list[dict]:
    from phasescope.reproduce.matrix import Entry
    from phasescope.reproduce.run import sweep_one, trained
    from phasescope.train.shipped import checkpoint_dir

    entries = (Entry(CONTROL), Entry(STEP2), Entry(HF_STEP2, hf=True))
    return [
        sweep_one(entry, seed, checkpoint_dir(models, entry.recipe, seed, entry.hf), out, "plain", samples, resamples)
        for entry in entries
        for seed in SEEDS
        if trained(models / f"{entry.recipe}-s{seed}")
    ]


def main(argv: list[str] | None = None) -> None:
    from phasescope.reproduce.amendment8 import runner_args, write_outputs

    args = runner_args("Sweep and judge amendment 9 (5c and 5a on new seeds).", "amendment9", argv)
    rows = sweep_all(args.models, args.out, args.samples, args.resamples)
    result = judge_amendment9(rows)
    write_outputs(args.out, "amendment9", {"result": result, "rows": rows}, markdown(result, rows))


if __name__ == "__main__":
    main()
