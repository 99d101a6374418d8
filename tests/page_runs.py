"""Small analysed runs whose pages the browser checks look at (tests/test_pages.py) and
docs/pages/make_pages.py photographs: a planted phase effect, a floor run (every answer wrong),
a ceiling run (every answer right), and compare.html of the three. Python callables on the
retrieval probe: seconds, no model to train."""

from __future__ import annotations

from pathlib import Path

import torch

import phasescope
from phasescope.backends import from_callable
from test_sweep import TASK, PhaseBlindAtBoundary, Planted

STEP = 4


def always_wrong(ids: torch.Tensor) -> torch.Tensor:
    """The retrieval probe's floor: all the weight on a value that is not the needle's."""
    right = Planted(STEP, None)(ids).argmax(dim=-1)  # [B,T] the needle's value where it is asked
    first, second = TASK.value_ids[0], TASK.value_ids[1]
    other = torch.where(right == first, second, first)
    return torch.zeros(*ids.shape, TASK.vocab_size).scatter_(-1, other[..., None], 10.0)


MODELS = {"effect": PhaseBlindAtBoundary(), "floor": always_wrong, "ceiling": Planted(STEP, None)}


def sweep_pages(root: Path, samples: int = 10, offsets: int = 12) -> dict[str, Path]:
    """report.html of each of MODELS' runs under ``root`` and compare.html of them: name -> page."""
    pages, runs = {}, []
    for name, fn in MODELS.items():
        run = root / name
        model = from_callable(fn, vocab_size=TASK.vocab_size, step=STEP, align=0, local=8)
        phasescope.sweep(model, task=TASK, samples=samples, offsets=range(offsets), out=run)
        phasescope.analyze(run, n_resamples=200)
        pages[name] = phasescope.report(run)
        runs.append(run)
    pages["compare"] = phasescope.compare(runs, root / "compare", labels=list(MODELS))
    return pages
