"""Readable token names for the retrieval task's ids, and a tokenizer file for HF exports."""

from __future__ import annotations

from pathlib import Path

from phasescope.data.retrieval import RetrievalTask


def token_names(task: RetrievalTask) -> list[str]:
    """Index = token id: <pad> <bos> <q> k0.. v0.. f0.."""
    return (
        ["<pad>", "<bos>", "<q>"]
        + [f"k{i}" for i in range(task.n_keys)]
        + [f"v{i}" for i in range(task.n_values)]
        + [f"f{i}" for i in range(task.n_filler)]
    )


def save_tokenizer(directory: Path, task: RetrievalTask) -> None:
    """A whitespace word-level tokenizer over the task's vocabulary (AutoTokenizer loads it)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {name: i for i, name in enumerate(token_names(task))}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>")
    fast.save_pretrained(str(directory))
