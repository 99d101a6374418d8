"""Tiny transformers models saved to a directory with a local tokenizer (no downloads), shared
by the tests that sweep ``hf:DIR``."""

from pathlib import Path

import torch


def word_tokenizer():
    """A fast tokenizer over the locally trained word BPE of test_probes."""
    from transformers import PreTrainedTokenizerFast

    from test_probes import _word_bpe

    return PreTrainedTokenizerFast(tokenizer_object=_word_bpe(), bos_token="Remember")


def eos_word_tokenizer():
    """The word BPE of test_probes with an end-of-text token (``<|end|>``), as lm-eval's
    generation tasks need (tests/data/lm_eval)."""
    from transformers import PreTrainedTokenizerFast

    from test_probes import _word_bpe

    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_word_bpe())
    tokenizer.add_special_tokens({"eos_token": "<|end|>"})
    return tokenizer


def save(model, directory: Path, tokenizer=None) -> Path:
    model.save_pretrained(directory)
    if tokenizer is not None:
        tokenizer.save_pretrained(directory)
    return directory


def tiny_qwen3(directory: Path, tokenizer=None, vocab_size: int = 64, **config) -> Path:
    """A one-layer Qwen3 (``config``: Qwen3Config fields replacing the tiny defaults)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    sizes = dict(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1
    )
    cfg = Qwen3Config(
        vocab_size=len(tokenizer) if tokenizer is not None else vocab_size, **(sizes | {"head_dim": 16} | config)
    )
    return save(Qwen3ForCausalLM(cfg), directory, tokenizer)


def tiny_deepseek_v4(directory: Path, tokenizer=None, vocab_size: int = 64, **config) -> Path:
    """A two-layer transformers DeepseekV4ForCausalLM (CSA, s = 4, w = 8) with DeepSeek-V4's raw
    window of 128 tokens; ``index_topk`` above any entry count used here, so its indexer keeps
    every entry (``config``: DeepseekV4Config fields replacing the tiny defaults)."""
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    from phasescope.backends.text_demo import CONFIG

    torch.manual_seed(0)
    # the text demo's sizes with DeepSeek-V4's raw window of 128 and untied embeddings
    sizes = CONFIG | dict(sliding_window=128, tie_word_embeddings=False, max_position_embeddings=262144)
    vocab = len(tokenizer) if tokenizer is not None else vocab_size
    model = DeepseekV4ForCausalLM(DeepseekV4Config(vocab_size=vocab, **(sizes | config)))
    return save(model.eval(), directory, tokenizer)
