"""A backend's own load options: each backend module declares ``Options``, a ``BackendOptions``
whose fields are its `phasescope sweep` model options (``option(default, help, ...)``,
phasescope/options.py), checked in its ``check()``. Options several backends share are declared
once here (``dtype``, ``device``, ``tokenizer``) and used by each. No torch: the command line
builds its table from these without loading a model library.
"""

from __future__ import annotations

from dataclasses import dataclass

from phasescope.errors import InputError
from phasescope.options import Options, option

DTYPES = ("float32", "bfloat16", "float16")


def model_option(default, help: str, **kw):
    """A model option (the Model panel of --help; not recorded in spec.json unless ``measured``)."""
    return option(default, help, **{"panel": "Model", "measured": False} | kw)


def dtype_option():
    return model_option(
        "float32", "Weights dtype: float32, bfloat16 or float16.", metavar="DTYPE", measured=True, logits=True
    )


def device_option():
    return model_option("cpu", "Torch device for the model: cpu, cuda, cuda:1, mps.", metavar="DEVICE")


def tokenizer_option():
    return model_option(
        None,
        "Tokenizer: a directory, or deepseek-v4 / qwen3 (shipped, no download). openai: the served model's "
        "(prompts are tokenized here); hf: replaces the model's own.",
        metavar="TOKENIZER",
        measured=True,  # the ids every prompt is made of
    )


@dataclass(frozen=True)
class BackendOptions(Options):
    """The base of every backend's ``Options``: a dtype, where declared, is one torch knows."""

    def check(self) -> None:
        dtype = getattr(self, "dtype", DTYPES[0])
        if dtype not in DTYPES:
            raise InputError(f"--dtype {dtype!r} is invalid; allowed: {' | '.join(DTYPES)}")


@dataclass(frozen=True)
class CallableOptions(BackendOptions):
    """A Python callable ``input_ids -> logits`` (``phasescope.sweep`` only): it loads nothing;
    a tokenizer named here builds text probes for it."""

    tokenizer: str | None = tokenizer_option()
