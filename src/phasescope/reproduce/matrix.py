"""The reproduction matrix: which trained models test which claim of the study.

Claims (the study's from-scratch results):

* ``period``   chunked-compression models are periodic in the target's phase, period = step (4, 6, 8)
* ``control``  a full-attention model at the same mean accuracy is not periodic
* ``nope``     the effect persists without RoPE
* ``mean``     the effect persists with plain mean pooling
* ``same_window`` the effect persists when key and value fall in the same compression window
* ``window``   a larger window at a fixed step keeps the period at the step

The rest of the study (issue #23; judged in reproduce/extended.py under rules fixed before the runs,
docs/reproduction.md): post-training narrows the gap, step 2 makes the period 2, KV-head
specialization, two predictions of the gradient-flow theory, and the period in 1,024-token rows.

Mitigations (equal step, judged by gap and mean accuracy): overlapping windows (w = 2s), per-head
stagger (against 4 KV heads without it), a larger raw window, random alignment in training, and
the test-time phase ensemble.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from phasescope.rundir.files import read_json
from phasescope.train import shipped
from phasescope.train.shipped import ASSETS, DEMO, DEMO_SEED0  # noqa: F401 (re-exported)

CLAIMS = {
    "period": "chunked compression makes accuracy periodic in the phase, period = step (steps 4, 6, 8)",
    "control": "a full-attention model at the same mean accuracy shows no periodicity",
    "nope": "the effect persists without RoPE",
    "mean": "the effect persists with plain mean pooling",
    "same_window": "the effect persists when key and value fall in the same compression window",
    "window": "a larger window at a fixed step keeps the period at the step",
}
# a model "learned" when its held-out accuracy sits in this band: far above chance (1/32) and
# below the ceiling, where a phase effect could not show
LEARNED_BAND = (0.2, 0.95)


@dataclass(frozen=True)
class Entry:
    recipe: str
    claims: tuple[str, ...] = ()
    mitigation: str | None = None  # its row label in the mitigation table
    same_window: bool = False  # also swept with --kv-gaps 0,1 (separates same-window from phase)
    hf: bool = False  # a transformers directory (swept as hf:DIR)
    ensemble: bool = False  # also swept with the test-time phase ensemble
    max_seeds: int | None = None  # shown on fewer seeds (not judged: nothing to pool)
    seeds: int | None = None  # shipped seeds 0..seeds-1 when more than the default 3 (amendment 5)
    amendment5_variants: tuple[str, ...] = ()  # extra sweeps amendments 5 and 6 judge (reproduce/run.py VARIANTS)
    amendment7_variants: tuple[str, ...] = ()  # extra sweeps amendment 7 judges (crossed design, depths)
    amendment10_variants: tuple[str, ...] = ()  # amendment 10: crossed sweeps below and above the indexer's threshold
    held_out_seeds: tuple[int, ...] = ()  # seeds trained after the rules (12 on): amendment 7's, every-seed summaries
    baseline: str = "tiny-s4"  # a mitigation is compared with this recipe (same KV-cache bytes)
    post_of: str | None = None  # a post-trained model: swept on this base recipe's task, paired with it by seed
    samples: int | None = None  # contents per sweep, when not the reproduction's --samples
    kv_ablation: bool = False  # also ablated one KV head's entries at a time (inspect/kv_heads.py)
    intervention: bool = False  # amendment 5d: the named KV heads hidden together vs random sets (intervention.py)
    swept: bool = True  # False: only trained by --retrain (a warm start other recipes begin from)
    preferences: bool = True  # counted in the learned-pooling-weights reading (issue #12)


HELD_OUT = (12, 13)  # amendment 7: two seeds per recipe trained by the same recipes, never shipped before it
# issue #60 item 1: the seeds its audit trained by the same recipes' commands, shipped so that every
# seed from 12 on is counted (amendments 8 and 9's seeds 16-19 are read in their own amendments)
LATER = (14, 15)
DEPTHS = (0.0, 0.25, 0.75, 1.0)  # 7b: the needle's depths swept beside the plain sweep's 0.5
DEPTH_VARIANTS = tuple(f"depth-{d:g}" for d in DEPTHS)
# amendment 10: context lengths below and above the tiny indexer's threshold (16 entries x step 4 = 64
# tokens): prompts of 49-62 tokens keep every entry, prompts of 113-127 tokens keep 16 of 28-31
THRESHOLD_CONTEXTS = (64, 128)
THRESHOLD_VARIANTS = tuple(f"crossed-ctx{n}" for n in THRESHOLD_CONTEXTS)

MATRIX = (
    # tiny-full first: --retrain starts the NoPE and 4-KV-head runs from its weights (init_from)
    Entry("tiny-full"),  # the 100% control, shown next to the matched one, not judged
    Entry(
        "tiny-s4",
        ("period", "same_window"),
        mitigation="baseline (s = w = 4)",
        same_window=True,
        ensemble=True,
        amendment5_variants=("kv-gaps-012",),
        amendment7_variants=("crossed-24", *DEPTH_VARIANTS),
        held_out_seeds=(*HELD_OUT, *LATER),
    ),
    Entry("tiny-s6", ("period",)),
    Entry(
        "tiny-s8",
        ("period",),
        amendment5_variants=("offsets-48", "pad-prefix-48"),
        amendment7_variants=("crossed-64",),
        held_out_seeds=(*HELD_OUT, *LATER),
    ),
    Entry(
        "hf-deepseek-v4-tiny",
        ("period",),
        hf=True,
        amendment7_variants=("crossed-24",),
        amendment10_variants=THRESHOLD_VARIANTS,  # the dense control
        held_out_seeds=HELD_OUT,
    ),
    Entry("tiny-full-matched", ("control",), held_out_seeds=LATER),
    Entry("tiny-s4-nope", ("nope",)),
    Entry("tiny-s4-mean", ("mean",)),
    Entry("tiny-s4-w8", ("window",), mitigation="(a) overlapping windows w = 2s"),
    Entry("tiny-s4-channel-w8", ("window",)),
    Entry("tiny-s4-channel", held_out_seeds=LATER),
    Entry("tiny-s4-L16", mitigation="(c) larger raw window L = 16"),
    Entry("tiny-s4-random-align", mitigation="(d) random alignment in training"),
    # the 4-KV-head pair has 4x tiny-s4's KV bytes and half its schedule: compared only with each other
    Entry(
        "tiny-s4-kv4",
        mitigation="4 KV heads (stagger's baseline)",
        baseline="tiny-s4-kv4",
        kv_ablation=True,
        seeds=5,
        intervention=True,
    ),
    Entry("tiny-s4-stagger", mitigation="(b) stagger, 4 KV heads", baseline="tiny-s4-kv4", kv_ablation=True),
    # issue #23 (after their sources: --retrain starts each from the run it needs)
    Entry("tiny-s4-post", post_of="tiny-s4", preferences=False),
    Entry("hf-deepseek-v4-tiny-post", hf=True, post_of="hf-deepseek-v4-tiny", preferences=False),
    Entry(  # step 2 (rule B; amendment 5: six seeds)
        "tiny-v4.1",
        preferences=False,
        seeds=6,
        amendment7_variants=("crossed-24", *DEPTH_VARIANTS),
        held_out_seeds=(*HELD_OUT, *LATER),
    ),
    Entry("hf-deepseek-v4-tiny-s2", hf=True, preferences=False),
    Entry("tiny-s2", preferences=False, seeds=6),  # theory T1 (amendment 5: six seeds)
    # amendment 10: the lightning indexer sparse past 64 tokens, read below and above that length
    Entry("hf-deepseek-v4-tiny-topk16", hf=True, amendment10_variants=THRESHOLD_VARIANTS, preferences=False),
    Entry("tiny-s4-d64", preferences=False),  # theory T2
    # amendment 1: step 2 on a harder task (the 128-token step-2 models reach the ceiling)
    Entry("tiny-s4-512", samples=128, preferences=False),
    Entry("tiny-s2-512", samples=128, preferences=False),  # theory T1'
    Entry("tiny-v4.1-512", samples=128, preferences=False),  # step 2 (B')
    Entry("tiny-full-d64", swept=False),  # amendment 2: tiny-s4-d64-init's warm start
    Entry("tiny-s4-d64-init", preferences=False),  # theory T2'
    Entry("tiny-full-v64", swept=False),  # the long recipe's warm start
    Entry("tiny-s4-long", samples=128, preferences=False),  # rule E
    Entry("tiny-s2-long", samples=128, preferences=False),  # amendment 3: B'' and T1''
)


def checkpoint_dir(root: Path, entry: Entry, seed: int) -> Path:
    """Where (recipe, seed) lives under ``root``: ``RECIPE-sSEED`` (transformers models: its hf/)."""
    return shipped.checkpoint_dir(root, entry.recipe, seed, entry.hf)


def final_eval(model_dir: Path) -> dict | None:
    """The last held-out evaluation: manifest.json's final_eval (shipped checkpoints), else the last
    evaluation line of log.jsonl (a training run directory; transformers: its parent's)."""
    import json

    from phasescope.train.shipped import SHIPPED_MANIFEST

    manifest = model_dir / SHIPPED_MANIFEST
    if manifest.exists():
        return read_json(manifest, "checkpoint manifest").get("final_eval")
    for log in (model_dir / "log.jsonl", model_dir.parent / "log.jsonl"):
        if log.exists():
            evals = [json.loads(line) for line in log.read_text().splitlines() if '"eval_accuracy"' in line]
            return evals[-1] if evals else None
    return None


def learned(evaluation: dict | None) -> bool:
    return evaluation is not None and LEARNED_BAND[0] <= evaluation["eval_accuracy"] <= LEARNED_BAND[1]
