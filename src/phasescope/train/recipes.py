"""Named training recipes: Python functions returning a TrainConfig.

Tiny recipes (2 layers, width 64) are sized to train on 2 CPU cores in minutes; every tiny
recipe states whether the token-shift input is on (it helps tiny models learn retrieval
but spreads each pair over neighbouring tokens, so it may shape the phase profile itself).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from phasescope.data.retrieval import RetrievalTask
from phasescope.errors import InputError
from phasescope.kv.config import CompressionConfig
from phasescope.model.config import preset
from phasescope.train.config import TrainConfig

TINY_TASK = RetrievalTask(
    n_keys=32,
    n_values=32,
    n_filler=8,
    key_len=1,
    value_len=1,
    n_pairs=16,
    n_queries=8,
    max_gap=2,
    min_distance=8,
    seq_len=128,
)
TINY_LOCAL = 8
FULL = CompressionConfig(kind="full")


def _tiny(name: str, scheme: CompressionConfig, about: str, token_shift: bool = True, **kw) -> TrainConfig:
    task = kw.pop("task", TINY_TASK)
    model = preset(
        "tiny",
        task.vocab_size,
        scheme,
        token_shift=token_shift,
        rope=kw.pop("rope", True),
        n_kv_heads=kw.pop("n_kv_heads", 1),
    )
    steps = kw.pop("steps", 2400)
    return TrainConfig(
        name=name,
        model=model,
        scheme=scheme,
        task=task,
        steps=steps,
        batch_size=32,
        lr=1e-3,  # 3e-3 stalled at chance for 900+ steps; 1e-3 learns (seen here)
        warmup_steps=100,
        eval_every=kw.pop("eval_every", 200),
        checkpoint_every=kw.pop("checkpoint_every", 200),
        about=about,
        **kw,
    )


def _s(step: int, pooler: str = "scalar_gate", window: int | None = None, **kw) -> CompressionConfig:
    return CompressionConfig(step=step, window=window or step, local=TINY_LOCAL, pooler=pooler, **kw)


RECIPES: dict[str, Callable[[], TrainConfig]] = {}


def recipe(name: str):
    def register(fn: Callable[[], TrainConfig]) -> Callable[[], TrainConfig]:
        RECIPES[name] = fn
        return fn

    return register


@recipe("tiny-full")
def tiny_full() -> TrainConfig:
    return _tiny("tiny-full", FULL, "control: full attention, token-shift on")


@recipe("tiny-full-matched")
def tiny_full_matched() -> TrainConfig:
    """tiny-full's exact run (same schedule, so the same weights at every step for a seed and
    thread count), evaluated every 25 steps. The matched control is the checkpoint whose
    held-out accuracy is nearest the compressed models' (~74%): full attention learns retrieval
    in one jump of ~50-100 steps whose timing varies by seed (around step 300 on seed 1, 600 on
    seed 0), so a fixed shorter schedule (--set steps=N) cannot match on every seed. Two passes:
    train with --stop-after ~1000 and read log.jsonl for the step N nearest the target, then
    train again into a new --out with --stop-after N (bit-identical at the same thread count),
    whose checkpoints/step-N is the control (only the last 2 checkpoints are kept)."""
    return _tiny(
        "tiny-full-matched",
        FULL,
        "matched control: tiny-full evaluated every 25 steps; use its checkpoint nearest ~74% accuracy",
        eval_every=25,
        checkpoint_every=25,
    )


@recipe("tiny-full-noshift")
def tiny_full_noshift() -> TrainConfig:
    return _tiny("tiny-full-noshift", FULL, "control without token-shift", token_shift=False)


@recipe("tiny-s4")
def tiny_s4() -> TrainConfig:
    return _tiny(
        "tiny-s4",
        _s(4),
        "s=w=4 scalar gate, L=8, warm start from full attention (600 steps), token-shift on",
        warm_start_steps=600,
    )


@recipe("tiny-s4-cold")
def tiny_s4_cold() -> TrainConfig:
    return _tiny("tiny-s4-cold", _s(4), "tiny-s4 trained compressed from step 0 (no warm start)")


@recipe("tiny-s4-noshift")
def tiny_s4_noshift() -> TrainConfig:
    return _tiny(
        "tiny-s4-noshift",
        _s(4),
        "tiny-s4 without token-shift (checks the input's influence on the phase effect)",
        token_shift=False,
        warm_start_steps=600,
    )


@recipe("tiny-s6")
def tiny_s6() -> TrainConfig:
    return _tiny(
        "tiny-s6",
        _s(6),
        "s=w=6 scalar gate, warm start (learns: ~48%, largest phase profile)",
        warm_start_steps=600,
    )


@recipe("tiny-s8")
def tiny_s8() -> TrainConfig:
    return _tiny(
        "tiny-s8",
        _s(8),
        "s=w=8 scalar gate (the study's step), warm start (learns slowly: 35-41% held out at 2400 steps on the "
        "five shipped seeds, 47.5% on one more; still rising)",
        warm_start_steps=600,
    )


@recipe("tiny-s4-mean")
def tiny_s4_mean() -> TrainConfig:
    return _tiny("tiny-s4-mean", _s(4, "mean"), "s=w=4 mean pooling, warm start", warm_start_steps=600)


@recipe("tiny-s4-channel")
def tiny_s4_channel() -> TrainConfig:
    return _tiny(
        "tiny-s4-channel",
        _s(4, "channel_gate"),
        "s=w=4 DeepSeek-V4 channel gate, warm start",
        warm_start_steps=600,
    )


@recipe("tiny-s4-w8")
def tiny_s4_w8() -> TrainConfig:
    return _tiny(
        "tiny-s4-w8",
        _s(4, window=8),
        "s=4, w=8 (overlapping windows) scalar gate, warm start; mitigation (a)",
        warm_start_steps=600,
    )


@recipe("tiny-s4-L16")
def tiny_s4_l16() -> TrainConfig:
    # min_distance must stay >= L so retrieval still goes through the compressed cache
    return _tiny(
        "tiny-s4-L16",
        replace(_s(4), local=16),
        "tiny-s4 with a raw local window L=16 (task min_distance 16), warm start; mitigation (c)",
        warm_start_steps=600,
        task=replace(TINY_TASK, min_distance=16),
    )


@recipe("tiny-s4-channel-w8")
def tiny_s4_channel_w8() -> TrainConfig:
    return _tiny(
        "tiny-s4-channel-w8",
        _s(4, "channel_gate", window=8),
        "V4 CSA geometry s=4, w=8, channel gate, warm start",
        warm_start_steps=600,
    )


@recipe("tiny-s4-nope")
def tiny_s4_nope() -> TrainConfig:
    # From a random init the NoPE warm start stays at 9-13% (600 and 1800 steps); tiny-full's
    # trained weights with RoPE removed still retrieve at 99% (its circuit matches content, not
    # position), so the warm start begins there.
    return _tiny(
        "tiny-s4-nope",
        _s(4),
        "s=w=4 scalar gate without any RoPE (NoPE), warm start from tiny-full's trained weights (same seed)",
        rope=False,
        warm_start_steps=600,
        init_from="tiny-full",
    )


# The 4-KV-head pair (mitigation b) trains 1,200 steps (600 full + 600 compressed): at 2,400 steps
# 4 KV heads reach the ceiling (98% on seeds 1 and 2), where the baseline's phase effect cannot show.
KV4_STEPS = 1200


def _kv4(name: str, stagger: bool, about: str) -> TrainConfig:
    # From a random init 4 KV heads stay at ~14% (the full-attention warm start does not learn
    # in 600 steps); tiny-full's weights widened to 4 KV heads compute the same function.
    return _tiny(
        name,
        _s(4, stagger=stagger),
        about,
        warm_start_steps=600,
        n_kv_heads=4,
        init_from="tiny-full",
        steps=KV4_STEPS,
    )


@recipe("tiny-s4-kv4")
def tiny_s4_kv4() -> TrainConfig:
    return _kv4(
        "tiny-s4-kv4",
        False,
        "tiny-s4 with 4 KV heads (the baseline for tiny-s4-stagger), warm start from tiny-full (KV heads "
        "widened), 1,200 steps",
    )


@recipe("tiny-s4-stagger")
def tiny_s4_stagger() -> TrainConfig:
    return _kv4(
        "tiny-s4-stagger",
        True,
        "tiny-s4-kv4 with staggered KV heads (aligns 0,1,2,3), same start and schedule; mitigation (b)",
    )


@recipe("tiny-s4-random-align")
def tiny_s4_random_align() -> TrainConfig:
    return _tiny(
        "tiny-s4-random-align",
        _s(4),
        "tiny-s4 trained with a random entry alignment each step (evaluated at align 0); mitigation (d)",
        warm_start_steps=600,
        random_align=True,
    )


@recipe("hf-deepseek-v4-tiny")
def hf_deepseek_v4_tiny() -> TrainConfig:
    """transformers' DeepseekV4ForCausalLM from a tiny config (CSA layers, s=4, w=8)."""
    cfg = _tiny("hf-deepseek-v4-tiny", _s(4, "channel_gate", window=8, sink=True), "transformers DeepseekV4, tiny")
    return replace(cfg, arch="hf-deepseek-v4", model=replace(cfg.model, n_kv_heads=1, token_shift=False))


# ---- issue #23: post-training, step 2, a theory test, a longer context ----------------------------

# Post-training: a short second stage on a changed data mix, from a learned base model (init_from, same
# seed). The study's post-training (SFT/RL after pretraining) is a short run at a lower learning rate on
# a different distribution of text; here: a quarter of the pretraining steps at 0.3x the peak learning
# rate on rows with fewer, more widely and more variably spaced pairs (12 pairs, 0-4 filler tokens
# between pairs, instead of 16 pairs with 0-2), same vocabulary, length and answer-only loss.
POST_TASK = replace(TINY_TASK, n_pairs=12, max_gap=4)
POST_STEPS = 600


def _post(base: TrainConfig, name: str) -> TrainConfig:
    return replace(
        base,
        name=name,
        task=POST_TASK,
        steps=POST_STEPS,
        warm_start_steps=0,  # the base model is already compressed
        lr=3e-4,
        warmup_steps=30,
        init_from=base.name,
        about=f"post-training of {base.name}: {POST_STEPS} steps at lr 3e-4 on 12 pairs with 0-4 filler between "
        f"pairs (from {base.name}'s trained weights, same seed)",
    )


@recipe("tiny-s4-post")
def tiny_s4_post() -> TrainConfig:
    return _post(tiny_s4(), "tiny-s4-post")


@recipe("hf-deepseek-v4-tiny-post")
def hf_deepseek_v4_tiny_post() -> TrainConfig:
    return _post(hf_deepseek_v4_tiny(), "hf-deepseek-v4-tiny-post")


@recipe("tiny-v4.1")
def tiny_v41() -> TrainConfig:
    from phasescope.kv.schemes import scheme

    # the v4.1 scheme (s = w = 2, channel gate without position bias, sink, rotated values) with the
    # tiny models' raw window L = 8 instead of 128 (the task's needles lie beyond 8 tokens)
    return _tiny(
        "tiny-v4.1",
        scheme("v4.1", local=TINY_LOCAL),
        "DeepSeek-V4.1 compressor (s=w=2, channel gate without position bias, sink, rotated values), L=8, warm start",
        warm_start_steps=600,
    )


@recipe("hf-deepseek-v4-tiny-s2")
def hf_deepseek_v4_tiny_s2() -> TrainConfig:
    """transformers' DeepseekV4 with compress rate 2 (transformers fixes w = 2s = 4)."""
    cfg = hf_deepseek_v4_tiny()
    return replace(
        cfg,
        name="hf-deepseek-v4-tiny-s2",
        scheme=_s(2, "channel_gate", window=4, sink=True),
        about="transformers DeepseekV4, tiny, CSA compress rate 2 (w=4)",
    )


# Issue #60 item 6 (amendment 10): the lightning indexer's threshold at a length this machine trains.
# DeepSeek-V4 keeps 512 entries per query at step 4, so it turns sparse past 2,048 tokens; here 16
# entries put the threshold at 64 tokens, inside the task's 128-token rows (queries at 104-127 see 26-31
# entries and keep 16 of them).
INDEX_TOPK = 16


@recipe("hf-deepseek-v4-tiny-topk16")
def hf_deepseek_v4_tiny_topk16() -> TrainConfig:
    """transformers' DeepseekV4 tiny with a sparse lightning indexer trained on its own objective."""
    cfg = hf_deepseek_v4_tiny()
    return replace(
        cfg,
        name="hf-deepseek-v4-tiny-topk16",
        index_topk=INDEX_TOPK,
        indexer_loss=1.0,
        indexer_dense_steps=600,
        about=f"transformers DeepseekV4, tiny, lightning indexer keeping {INDEX_TOPK} entries (sparse past "
        f"{INDEX_TOPK * cfg.scheme.step} tokens), trained by its KL to the main attention, dense for the first "
        "600 steps",
    )


@recipe("tiny-s2")
def tiny_s2() -> TrainConfig:
    # the theory's step prediction (docs/theory.md): tiny-s4 with s = w = 2, all else equal
    return _tiny("tiny-s2", _s(2), "s=w=2 scalar gate, L=8, warm start (tiny-s4 at step 2)", warm_start_steps=600)


@recipe("tiny-s2-channel")
def tiny_s2_channel() -> TrainConfig:
    # amendment 8's fourth cell (step {2, 4} x pooler {scalar, channel}): tiny-s4-channel at step 2
    return _tiny(
        "tiny-s2-channel",
        _s(2, "channel_gate"),
        "s=w=2 DeepSeek-V4 channel gate, L=8, warm start (tiny-s4-channel at step 2; amendment 8)",
        warm_start_steps=600,
    )


@recipe("tiny-s4-d64")
def tiny_s4_d64() -> TrainConfig:
    # the theory's capacity prediction (docs/theory.md): tiny-s4 with head dim 64 (entry capacity d = 64)
    cfg = _tiny("tiny-s4-d64", _s(4), "tiny-s4 with head dim 64 instead of 16, warm start", warm_start_steps=600)
    return replace(cfg, model=replace(cfg.model, head_dim=64))


# tiny-s4-d64's own full-attention warm start does not learn in 600 steps at head dim 64 (full attention
# at head dim 64 learns only at step ~1,100-1,200, seed 0), so its compressed phase began from an
# unlearned model (37 / 24 / 15% at the end). tiny-s4-d64-init starts instead from tiny-full-d64's
# trained weights (same seed), as the NoPE and 4-KV-head recipes start from tiny-full.
@recipe("tiny-full-d64")
def tiny_full_d64() -> TrainConfig:
    cfg = _tiny("tiny-full-d64", FULL, "tiny-full with head dim 64 (tiny-s4-d64-init's warm start)")
    return replace(cfg, model=replace(cfg.model, head_dim=64))


@recipe("tiny-s4-d64-init")
def tiny_s4_d64_init() -> TrainConfig:
    cfg = _tiny(
        "tiny-s4-d64-init",
        _s(4),
        "tiny-s4 with head dim 64, warm start from tiny-full-d64's trained weights (same seed); theory T2'",
        warm_start_steps=600,
        init_from="tiny-full-d64",
    )
    return replace(cfg, model=replace(cfg.model, head_dim=64))


# A longer context: 1,024-token rows with 64 pairs spread over ~500 tokens (0-12 filler between pairs);
# 64 keys and 64 values (64 distinct keys per row need 64 key tokens), batch 8 rows (8,192 tokens a step).
LONG_TASK = RetrievalTask(
    n_keys=64,
    n_values=64,
    n_filler=8,
    key_len=1,
    value_len=1,
    n_pairs=64,
    n_queries=16,
    max_gap=12,
    min_distance=8,
    seq_len=1024,
)


# From a random init the long recipe's full-attention warm start stayed at chance (1.1% after 600 steps,
# seed 0), while tiny-full's trained weights adapted to 1,024-token rows (32 pairs) in 50 steps (99%).
# So the long recipe starts from a full-attention model trained on 128-token rows with the long task's
# vocabulary (tiny-full-v64, same seed), adapts it to 1,024 tokens for 200 full-attention steps, then
# compresses.
@recipe("tiny-full-v64")
def tiny_full_v64() -> TrainConfig:
    return _tiny(
        "tiny-full-v64",
        FULL,
        "tiny-full with 64 keys and 64 values (the long recipe's vocabulary) on 128-token rows; its warm start",
        task=replace(TINY_TASK, n_keys=LONG_TASK.n_keys, n_values=LONG_TASK.n_values),
        steps=1600,
    )


def _long(name: str, step: int, about: str) -> TrainConfig:
    """The long task at step ``step``: from tiny-full-v64 (same seed), 200 full-attention steps at
    1,024 tokens, then compressed; batch 8."""
    cfg = _tiny(name, _s(step), about, warm_start_steps=200, steps=2000, task=LONG_TASK, init_from="tiny-full-v64")
    return replace(cfg, batch_size=8)


@recipe("tiny-s4-long")
def tiny_s4_long() -> TrainConfig:
    return _long(
        "tiny-s4-long",
        4,
        "tiny-s4 on 1,024-token rows with 64 pairs (64 keys, 64 values), batch 8; starts from tiny-full-v64 "
        "(same seed), 200 full-attention steps at 1,024 tokens, then compressed",
    )


# Amendment 3 (docs/reproduction.md): the step-2 models reach the ceiling on 512-token rows too, so
# step 2 on the long task, exactly as tiny-s4-long but s = w = 2 (rules B'' and T1'').
@recipe("tiny-s2-long")
def tiny_s2_long() -> TrainConfig:
    return _long(
        "tiny-s2-long",
        2,
        "tiny-s4-long with s = w = 2: 1,024-token rows with 64 pairs, from tiny-full-v64 (same seed); B'', T1''",
    )


# A harder task at the tiny models' vocabulary (32 keys, 32 values: the theory's V = 32), for the
# step-2 models, which learn the 128-token task completely (tiny-s2: 100% on 3 seeds; tiny-v4.1: 99%),
# where no phase effect can show: 512-token rows with 32 pairs spread by 0-10 filler tokens, batch 8
# (4,096 tokens a step, as the 128-token recipes). tiny-full's weights adapt to such rows within 50
# steps (99% at 1,024 tokens, measured), so each starts from tiny-full (same seed), trains 200
# full-attention steps on the new rows, then 1,200 compressed steps.
TASK_512 = replace(TINY_TASK, n_pairs=32, n_queries=16, max_gap=10, seq_len=512)


def _at_512(name: str, scheme: CompressionConfig, about: str) -> TrainConfig:
    cfg = _tiny(name, scheme, about, warm_start_steps=200, steps=1400, task=TASK_512, init_from="tiny-full")
    return replace(cfg, batch_size=8)


@recipe("tiny-s4-512")
def tiny_s4_512() -> TrainConfig:
    return _at_512(
        "tiny-s4-512", _s(4), "tiny-s4 on 512-token rows with 32 pairs, from tiny-full (the step-2 pairs' base)"
    )


@recipe("tiny-s2-512")
def tiny_s2_512() -> TrainConfig:
    return _at_512("tiny-s2-512", _s(2), "tiny-s2 on 512-token rows with 32 pairs, from tiny-full (theory T1')")


@recipe("tiny-v4.1-512")
def tiny_v41_512() -> TrainConfig:
    from phasescope.kv.schemes import scheme

    return _at_512(
        "tiny-v4.1-512", scheme("v4.1", local=TINY_LOCAL), "tiny-v4.1 on 512-token rows with 32 pairs, from tiny-full"
    )


def _qwen3(name: str, scheme: CompressionConfig, about: str) -> TrainConfig:
    task = RetrievalTask(
        n_keys=256,
        n_values=256,
        n_filler=64,
        key_len=2,
        value_len=2,
        n_pairs=200,
        n_queries=16,
        max_gap=4,
        min_distance=64,
        seq_len=2048,
    )
    model = preset("qwen3-0.6b", task.vocab_size, scheme)
    return TrainConfig(
        name=name,
        model=model,
        scheme=scheme,
        task=task,
        steps=20000,
        batch_size=64,
        lr=3e-4,
        warmup_steps=1000,
        eval_every=500,
        checkpoint_every=500,
        about=about,
    )


@recipe("qwen3-0.6b-full")
def qwen3_0_6b_full() -> TrainConfig:
    return _qwen3("qwen3-0.6b-full", FULL, "Qwen3-0.6B shape, full attention (needs a GPU)")


@recipe("qwen3-0.6b-study")
def qwen3_0_6b_study() -> TrainConfig:
    scheme = CompressionConfig(step=8, window=8, local=16, pooler="scalar_gate")
    cfg = _qwen3(
        "qwen3-0.6b-study",
        scheme,
        "the study's architecture: Qwen3-0.6B, s=w=8, scalar gate, L=16, 1 KV head",
    )
    return replace(cfg, model=replace(cfg.model, n_kv_heads=1))


def get_recipe(name: str) -> TrainConfig:
    if name not in RECIPES:
        raise InputError(f"unknown recipe {name!r}; known: {', '.join(RECIPES)} (see `phasescope recipes`)")
    return RECIPES[name]()
