"""Starting a run from a trained model (init_from) and training with random alignment (random_align)."""

import json
from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file, save_model

from phasescope.errors import InputError
from phasescope.kv.config import CompressionConfig
from phasescope.model.config import preset
from phasescope.model.decoder import Decoder
from phasescope.reproduce.matrix import DEMO
from phasescope.train.config import apply_overrides
from phasescope.train.init import aligned, init_weights, random_alignment, resolve_init
from phasescope.train.recipes import get_recipe
from phasescope.train.trainer import train
from test_training import QUICK, losses

FULL = CompressionConfig(kind="full")
S4 = CompressionConfig(step=4, window=4, local=8)


def decoder(scheme=FULL, seed=0, **kw) -> Decoder:
    torch.manual_seed(seed)
    return Decoder(preset("tiny", 40, scheme, **kw)).eval()


def model_dir(tmp_path, model: Decoder, name="src"):
    out = tmp_path / name
    out.mkdir()
    save_model(model, str(out / "model.safetensors"))
    (out / "model_config.json").write_text(json.dumps(model.cfg.to_dict()))
    return out


IDS = torch.randint(3, 40, (2, 40), generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("source_kv", [1, 2])
def test_widened_kv_heads_compute_the_same_function(tmp_path, source_kv):
    source = decoder(n_kv_heads=source_kv)
    target = decoder(seed=5, n_kv_heads=4)
    assert not torch.allclose(source(IDS), target(IDS))
    record = init_weights(target, model_dir(tmp_path, source))
    assert record["kv_heads_widened"] == 4 // source_kv and record["kept_init"] == []
    torch.testing.assert_close(target(IDS), source(IDS), atol=1e-5, rtol=1e-5)


def test_rope_and_scheme_may_differ_and_new_pooler_parameters_keep_their_init(tmp_path):
    source = decoder()
    target = decoder(S4, seed=3, rope=False)
    pooler_before = {k: v.clone() for k, v in target.state_dict().items() if "pooler" in k}
    record = init_weights(target, model_dir(tmp_path, source))
    assert record["kept_init"] == sorted(pooler_before)
    after = target.state_dict()
    assert all(torch.equal(after[k], v) for k, v in pooler_before.items())
    assert all(torch.equal(after[k], v) for k, v in source.state_dict().items() if k in after)


@pytest.mark.parametrize(
    ("source_kw", "target_kw", "message"),
    [
        ({"n_kv_heads": 4}, {"n_kv_heads": 1}, "KV heads can only be widened by a whole factor"),
        ({"token_shift": True}, {"token_shift": False}, "no place in this model"),
    ],
)
def test_incompatible_sources_are_refused_with_the_reason(tmp_path, source_kw, target_kw, message):
    source_dir = model_dir(tmp_path, decoder(**source_kw))
    with pytest.raises(InputError, match=message):
        init_weights(decoder(**target_kw), source_dir)


def test_an_unreadable_source_is_refused_with_the_reason(tmp_path):
    source_dir = model_dir(tmp_path, decoder())
    (source_dir / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(InputError, match="cannot read model.safetensors"):
        init_weights(decoder(), source_dir)


def test_init_from_names_a_directory_or_a_shipped_recipe(tmp_path):
    assert resolve_init("", 0) is None
    assert resolve_init("tiny-full", 0) == DEMO / "tiny-full"
    with pytest.raises(InputError, match=r"ships no checkpoint of that recipe for seed 77.*--set init_from=DIR"):
        resolve_init("tiny-full", 77)
    with pytest.raises(InputError, match="neither a recipe name nor a model directory"):
        resolve_init(str(tmp_path), 0)
    with pytest.raises(InputError, match="is a recipe of arch=hf-deepseek-v4; this run's arch is phasescope"):
        resolve_init("hf-deepseek-v4-tiny", 1)
    with pytest.raises(InputError, match="is a recipe of arch=phasescope; this run's arch is hf-deepseek-v4"):
        resolve_init("tiny-full", 0, arch="hf-deepseek-v4")


def quick(*extra):
    return apply_overrides(get_recipe("tiny-s4-kv4"), QUICK + list(extra))


def test_a_run_starts_from_the_source_weights_and_records_them(tmp_path):
    source = DEMO / "tiny-full"
    cfg = quick(f"init_from={source}", "steps=1", "warm_start_steps=0", "lr=1e-12", "eval_every=1")
    train(cfg, tmp_path / "run", progress=False)
    record = json.loads((tmp_path / "run" / "init_from.json").read_text())
    assert record["path"] == str(source.resolve()) and len(record["sha256"]) == 64
    trained = load_file(tmp_path / "run" / "model.safetensors")
    src = load_file(source / "model.safetensors")
    torch.testing.assert_close(trained["blocks.0.attn.q_proj.weight"], src["blocks.0.attn.q_proj.weight"])
    torch.testing.assert_close(trained["blocks.1.attn.k_proj.weight"], src["blocks.1.attn.k_proj.weight"].repeat(4, 1))


def test_bad_init_from_is_refused_before_the_run_directory_is_written(tmp_path):
    with pytest.raises(InputError, match="neither a recipe name"):
        train(quick(f"init_from={tmp_path}"), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_resume_is_exact_with_init_from_and_random_align(tmp_path):
    cfg = apply_overrides(get_recipe("tiny-s4"), QUICK + [f"init_from={DEMO / 'tiny-full'}", "random_align=true"])
    train(cfg, tmp_path / "straight", progress=False)
    train(cfg, tmp_path / "cut", progress=False, stop_at=5)
    train(cfg, tmp_path / "cut", resume=True, progress=False)
    assert losses(tmp_path / "cut") == losses(tmp_path / "straight")


@pytest.mark.parametrize("align", [1, 2, 3])
def test_aligned_equals_a_model_built_with_that_align(align):
    model = decoder(S4)
    built = decoder(replace(S4, align=align))
    built.load_state_dict(model.state_dict())
    reference = built(IDS)
    with aligned(model, align):
        moved = model(IDS)
    torch.testing.assert_close(moved, reference)
    assert not torch.allclose(model(IDS), reference)  # restored to align 0 afterwards
    assert all(b.attn.scheme.align == 0 for b in model.blocks)


def test_aligned_restores_the_scheme_after_an_error():
    model = decoder(S4)
    with pytest.raises(RuntimeError), aligned(model, 2):
        raise RuntimeError("boom")
    assert all(b.attn.scheme.align == 0 for b in model.blocks)


def test_random_alignment_is_reproducible_and_covers_every_align():
    draws = [random_alignment(0, step, 4) for step in range(200)]
    assert draws == [random_alignment(0, step, 4) for step in range(200)]
    assert sorted(set(draws)) == [0, 1, 2, 3]
    assert draws != [random_alignment(1, step, 4) for step in range(200)]


def test_random_align_changes_training_but_not_the_evaluated_model(tmp_path):
    plain = apply_overrides(get_recipe("tiny-s4"), QUICK)
    train(plain, tmp_path / "plain", progress=False)
    train(replace(plain, random_align=True), tmp_path / "random", progress=False)
    compressed = [loss for (step, loss) in losses(tmp_path / "random") if step >= plain.warm_start_steps]
    assert compressed != [loss for (step, loss) in losses(tmp_path / "plain") if step >= plain.warm_start_steps]
    warm = plain.warm_start_steps
    assert losses(tmp_path / "random")[:warm] == losses(tmp_path / "plain")[:warm]  # full attention: no boundaries
    saved = json.loads((tmp_path / "random" / "model_config.json").read_text())
    assert all(layer["align"] == 0 for layer in saved["layers"])


@pytest.mark.parametrize(
    ("recipe", "edit", "message"),
    [
        ("tiny-full", "random_align=true", "full-attention scheme"),
        ("hf-deepseek-v4-tiny", "random_align=true", "arch=hf-deepseek-v4"),
    ],
)
def test_config_refuses_what_the_architecture_cannot_do(recipe, edit, message):
    with pytest.raises(InputError, match=message):
        apply_overrides(get_recipe(recipe), [edit])


def test_a_compressed_source_for_a_full_attention_warm_start_is_named_and_nothing_is_written(tmp_path):
    """tiny-s4 from tiny-s4's own weights with its 600-step warm start: the warm start's model has
    no compressor, which the message says (it used to say "a different architecture"), and the
    refusal leaves no train_config.json behind (a retry then said "pass --resume")."""
    cfg = apply_overrides(get_recipe("tiny-s4"), [f"init_from={DEMO / 'tiny-s4'}", "steps=700"])
    with pytest.raises(InputError, match="this run starts with full-attention warm-start steps.*warm_start_steps=0"):
        train(cfg, tmp_path / "run", progress=False, stop_at=1)
    assert not (tmp_path / "run").exists()
