"""Makes ``lm_eval --model phasescope-ensemble`` work once phasescope is installed.

lm-eval 0.4.13 resolves ``--model NAME`` in its own registry and discovers no plugins, so the
name is put there at start-up by ``phasescope_lm_eval.pth`` in site-packages, and only in a
process running lm-eval's command line (``lm_eval``, ``lm-eval``, ``python -m lm_eval``); every
other Python process skips it after one look at ``sys.argv``. It registers a lazy placeholder:
phasescope and torch load only if the model is used. A wheel install of phasescope ships the
file (setup.py); an editable install (``make``) writes it with
``python -m phasescope.lm_eval_plugin --install``. Without it, ``python -m
phasescope.lm_eval_plugin ARGS`` runs lm-eval's command line with the model registered, and in
Python ``import phasescope.lm_eval_model`` registers it.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

NAME = "phasescope-ensemble"
TARGET = "phasescope.lm_eval_model:PhaseEnsembleLM"
PTH = "phasescope_lm_eval.pth"
PTH_LINE = "import phasescope.lm_eval_plugin as _phasescope_lm_eval; _phasescope_lm_eval.activate()\n"


def register() -> None:
    """Put ``phasescope-ensemble`` in lm-eval's model registry (lazily: a placeholder string)."""
    import lm_eval.models  # noqa: F401  the built-in names first: lm-eval imports them only into an empty registry
    from lm_eval.api.registry import model_registry

    if NAME not in model_registry:
        model_registry.register(NAME, target=TARGET)


def is_lm_eval_cli() -> bool:
    name = os.path.basename(sys.argv[0]) if sys.argv else ""
    return name in ("lm_eval", "lm-eval") or list(getattr(sys, "orig_argv", []))[1:3] == ["-m", "lm_eval"]


def activate() -> None:
    """Called by the .pth at interpreter start-up: registers in lm-eval's CLI, never raises."""
    if not is_lm_eval_cli():
        return
    try:
        register()
    except Exception as err:  # a broken lm-eval must not break Python's start-up
        print(f"phasescope: could not register {NAME} with lm-eval ({type(err).__name__}: {err})", file=sys.stderr)


def install(site_packages: str | None = None) -> Path:
    """Write the .pth into ``site_packages`` (default: this interpreter's)."""
    path = Path(site_packages or sysconfig.get_paths()["purelib"]) / PTH
    path.write_text(PTH_LINE)
    return path


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--install"]:
        print(f"wrote {install()}: `lm_eval --model {NAME}` now finds phasescope's model")
        return
    register()
    from lm_eval.__main__ import cli_evaluate

    sys.argv = ["lm_eval", *argv]
    cli_evaluate()


if __name__ == "__main__":
    main()
