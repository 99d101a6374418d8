"""``phasescope-ensemble``: the test-time phase ensemble as an lm-evaluation-harness model.

    lm_eval --model phasescope-ensemble --model_args base=hf,pretrained=DIR,step=4 --tasks ...

Any model phasescope loads (``base=hf``: a transformers directory; ``base=phasescope``: a
phasescope model directory) is scored through the phase ensemble (``run.ensemble``): every
sequence is read ``step`` times with 0..step-1 pad tokens after its first token and the
next-token distributions are averaged, so lm-eval's tables can put ``hf`` and
``phasescope-ensemble`` side by side. Tokenization is lm-eval's ``hf`` model's
(``tokenizer.encode`` with the tokenizer's special tokens, trailing context spaces moved into
the continuation), so with the ensemble off the numbers would be lm-eval's own.

Model arguments: ``base`` (hf | phasescope), ``pretrained`` (the directory), ``step`` (default:
the model's own compression step), ``pad_id`` (default: a newline or space token),
``tokenizer`` (a directory, or deepseek-v4 / qwen3), ``dtype``, ``device``, ``batch_size``,
``max_gen_toks`` (default 256, as lm-eval's hf).

Importing this module registers the name; the ``lm_eval`` command finds it through
``phasescope_lm_eval.pth``, which ``pip install 'phasescope[lm-eval]'`` leaves in site-packages
(see ``phasescope.lm_eval_plugin``).
"""

from __future__ import annotations

import warnings

from lm_eval.api.model import TemplateLM
from lm_eval.api.registry import register_model

from phasescope.errors import InputError
from phasescope.probes.base import ProbeItem

BASES = {"hf": "hf:", "phasescope": ""}


@register_model("phasescope-ensemble")
class PhaseEnsembleLM(TemplateLM):
    backend = "causal"  # lm-eval's _encode_pair: encode context + continuation, then split

    def __init__(
        self,
        pretrained: str | None = None,
        base: str = "hf",
        step: int | None = None,
        pad_id: int | None = None,
        tokenizer: str | None = None,
        dtype: str = "float32",
        device: str | None = "cpu",
        batch_size: int | str | None = 1,
        max_gen_toks: int = 256,
        **_ignored,
    ):
        super().__init__()
        from phasescope.backends import backend_options, resolve_model, spec_kind
        from phasescope.run.ensemble import pad_token, phase_ensemble

        if base not in BASES or not pretrained:
            raise InputError(f"phasescope-ensemble: pass base=hf|phasescope and pretrained=DIR (got base={base!r})")
        spec = BASES[base] + str(pretrained)
        options = backend_options(spec_kind(spec), {"dtype": dtype, "device": _usable(device), "tokenizer": tokenizer})
        model = resolve_model(spec, options)
        step = int(step) if step is not None else model.info.geometry.step
        if step is None:
            raise InputError(
                f"phasescope-ensemble: {pretrained} declares no compression step; pass step=4 (or its step)"
            )
        self.tokenizer = model.info.tokenizer
        if self.tokenizer is None:
            raise InputError(f"phasescope-ensemble: {pretrained} has no tokenizer; pass tokenizer=DIR")
        pad = int(pad_id) if pad_id is not None else pad_token(model, self.tokenizer)
        self.model = phase_ensemble(model, step, pad)
        self.step, self.pad_id = step, pad
        self.batch_size = int(batch_size) if str(batch_size).isdigit() else 1
        self.max_gen_toks = int(max_gen_toks)

    @classmethod
    def create_from_arg_string(cls, arg_string: str, additional_config: dict | None = None):
        """lm-eval's CLI adds its own batch_size/device (device defaults to cuda:0); what the user
        wrote in --model_args wins instead of clashing with them."""
        from lm_eval.utils import simple_parse_args_string

        args = simple_parse_args_string(arg_string)
        extra = {k: v for k, v in (additional_config or {}).items() if v is not None and k not in args}
        return cls(**args, **extra)

    @property
    def eot_token_id(self) -> int:
        return self.tokenizer.eos_token_id

    @property
    def prefix_token_id(self) -> int:
        bos = getattr(self.tokenizer, "bos_token_id", None)
        return bos if bos is not None else self.eot_token_id

    def tok_encode(self, string: str, add_special_tokens: bool | None = None, **kwargs) -> list[int]:
        """As lm-eval's hf model: the tokenizer's own special tokens unless told otherwise."""
        if add_special_tokens is None:
            return list(self.tokenizer.encode(string))
        return list(self.tokenizer.encode(string, add_special_tokens=add_special_tokens))

    def tok_decode(self, tokens: list[int]) -> str:
        return self.tokenizer.decode(list(tokens), skip_special_tokens=True)

    def _loglikelihood_tokens(self, requests, disable_tqdm: bool = False, **kwargs) -> list[tuple[float, bool]]:
        """(log-prob of the continuation, whether greedy decoding reproduces it), ensemble-averaged."""
        from phasescope.backends.scoring import score_items

        items = [_item(context, continuation) for _, context, continuation in requests]
        out = []
        for start in range(0, len(items), self.batch_size):
            for result in score_items(self.model.logits_where, items[start : start + self.batch_size]):
                out.append((float(result["logprobs"]["c"]), bool(result["greedy"])))
        return out

    def loglikelihood_rolling(self, requests, disable_tqdm: bool = False) -> list[float]:
        raise NotImplementedError(
            "phasescope-ensemble scores answers after a context; perplexity tasks are not supported"
        )

    def generate_until(self, requests, disable_tqdm: bool = False) -> list[str]:
        """Greedy generation through the ensemble; stop sequences and EOS as lm-eval's hf model."""
        from lm_eval.models.utils import handle_stop_sequences, normalize_gen_kwargs, postprocess_generated_text

        from phasescope.probes.lm_eval_tasks import Generate
        from phasescope.run.generation import generate

        eos = (
            self.tokenizer.decode([self.eot_token_id], skip_special_tokens=False)
            if self.eot_token_id is not None
            else None
        )
        texts = []
        for request in requests:
            context, gen_kwargs = request.args[0], dict(request.args[1])
            kwargs = normalize_gen_kwargs(gen_kwargs, self.max_gen_toks)
            until = handle_stop_sequences(kwargs.get("until"), eos=eos)
            spec = Generate(int(kwargs["max_gen_toks"]), tuple(until), self.eot_token_id, self.tok_decode)
            item = ProbeItem(0, 0, self.tok_encode(context), {}, "", 0, 0, generate=spec)
            (ids,) = generate(self.model, [item])
            texts.append(postprocess_generated_text(self.tok_decode(ids), until, None))
        return texts


def _item(context: list[int], continuation: list[int]) -> ProbeItem:
    return ProbeItem(0, 0, list(context), {"c": list(continuation)}, "c", len(context), len(context))


def _usable(device: str | None) -> str:
    """``device``, or cpu when lm-eval's default cuda:0 meets a machine without CUDA (as lm-eval's
    own hf model does); a device asked for in --model_args that is missing is still refused."""
    import torch

    if device and device.startswith("cuda") and not torch.cuda.is_available():
        warnings.warn(f"phasescope-ensemble: no CUDA here, running on cpu instead of {device}", stacklevel=2)
        return "cpu"
    return device or "cpu"
