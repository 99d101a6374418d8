"""demo:deepseek-v4-text (#59 item 8): a text model with DeepSeek-V4's real tokenizer, built on first
use from its shipped config (no download, no shipped weights), the same model at each build, and
swept by a text probe by name from any directory."""

import pytest
from safetensors.torch import load_file

import phasescope
from phasescope.backends.text_demo import NAME, text_model_dir
from phasescope.backends.tokenizers import load_tokenizer
from phasescope.shipped import expand, shipped_names


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PHASESCOPE_CACHE", str(cache))
        yield text_model_dir(), cache


def test_it_is_built_once_with_the_real_tokenizer_and_the_same_weights_each_time(built, tmp_path, monkeypatch):
    directory, cache = built
    assert directory.is_relative_to(cache) and NAME in shipped_names()
    from transformers import AutoTokenizer

    ours, real = AutoTokenizer.from_pretrained(directory), load_tokenizer("deepseek-v4")
    text = "The capital of Iran is Tehran.\n"
    assert ours.encode(text, add_special_tokens=False) == real.encode(text) and len(ours) == 129_280
    monkeypatch.setenv("PHASESCOPE_CACHE", str(tmp_path))  # a second machine: built again, the same weights
    again = load_file(text_model_dir() / "model.safetensors")
    first = load_file(directory / "model.safetensors")
    assert again.keys() == first.keys() and all((again[k] == first[k]).all() for k in first)


def test_a_text_probe_sweeps_it_by_name(built, tmp_path, monkeypatch):
    directory, cache = built
    monkeypatch.setenv("PHASESCOPE_CACHE", str(cache))
    assert expand(f"demo:{NAME}") == f"hf:{directory}"  # built already: not built again
    monkeypatch.chdir(tmp_path)
    result = phasescope.sweep(f"demo:{NAME}", samples=2, offsets=range(8), out=tmp_path / "run")
    assert len(result.records) == 16 and all(r.target_text for r in result.records)
    assert result.geometry.step == 4 and result.geometry.local == 16
