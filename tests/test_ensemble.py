"""The phase ensemble (run.ensemble): a test-time remedy scoring every prompt at `step` pad lengths."""

import pytest
import torch

import phasescope
from phasescope.backends import from_callable
from phasescope.backends.base import Backend, ModelInfo
from phasescope.backends.logits import LogitsBackend
from phasescope.errors import InputError
from phasescope.run.ensemble import combine, pad_token, phase_ensemble, shifted_copies
from test_sweep import TASK, planted_model


def by_phase(records, step=4):
    out = []
    for p in range(step):
        mine = [r.correct for r in records if r.phase == p]
        out.append(sum(mine) / len(mine))
    return out


def test_shifted_copies_insert_pads_after_the_first_token():
    ids = torch.tensor([[5, 6, 7]])
    copies = shifted_copies(ids, 3, pad_id=9)
    assert [c.tolist() for c in copies] == [[[5, 6, 7]], [[5, 9, 6, 7]], [[5, 9, 9, 6, 7]]]


def test_a_position_blind_model_is_unchanged_by_the_ensemble():
    """A bigram model (logits depend on the current token only) gives every copy the same
    prediction at the same original token, so the ensemble equals the plain log-softmax."""
    torch.manual_seed(0)
    table = torch.randn(20, 20)
    model = from_callable(lambda ids: table[ids], vocab_size=20, step=4)
    ids = torch.randint(0, 20, (3, 11))
    ensembled = phase_ensemble(model, 4, pad_id=1).logits(ids)
    assert torch.allclose(ensembled, torch.log_softmax(table[ids], -1), atol=1e-6)
    assert torch.allclose(combine([table[ids]], ids.shape[1]), torch.log_softmax(table[ids], -1))


def test_the_ensemble_removes_a_planted_boundary_gap():
    plain = phasescope.sweep(planted_model(), task=TASK, samples=6, design="pad-prefix", offsets=range(8))
    ensembled = phasescope.sweep(
        planted_model(), task=TASK, samples=6, design="pad-prefix", offsets=range(8), phase_ensemble=True
    )
    assert by_phase(plain.records)[3] < 0.2 and min(by_phase(plain.records)[:3]) == 1.0
    assert by_phase(ensembled.records) == [1.0, 1.0, 1.0, 1.0]  # 3 of 4 copies answer right at every phase
    key = [(r.content_id, r.offset, r.phase) for r in plain.records]
    assert key == [(r.content_id, r.offset, r.phase) for r in ensembled.records]  # nominal phases kept


def test_pad_token_and_refusals():
    native = LogitsBackend(ModelInfo(vocab_size=75, task=TASK.to_dict()), lambda ids: ids)
    assert pad_token(native) == int(TASK.filler_ids[0])
    with pytest.raises(InputError, match="ensemble_pad_id"):
        pad_token(LogitsBackend(ModelInfo(vocab_size=75), lambda ids: ids))
    served = Backend()
    served.info = ModelInfo(vocab_size=75)
    with pytest.raises(InputError, match="logits here"):
        phase_ensemble(served, 4, 1)
    with pytest.raises(InputError, match="step >= 2"):
        phase_ensemble(native, 1, 1)


def test_the_sweep_command_takes_phase_ensemble(tmp_path):
    from pathlib import Path

    from typer.testing import CliRunner

    from phasescope.cli import app

    model = Path(phasescope.__file__).parent / "assets" / "demo" / "tiny-s4"
    args = ["sweep", "--model", str(model), "--samples", "2", "--offsets", "0:8", "--no-progress"]
    result = CliRunner().invoke(app, [*args, "--phase-ensemble", "--out", str(tmp_path / "ens")])
    assert result.exit_code == 0, result.output
    manifest = (tmp_path / "ens" / "manifest.json").read_text()
    assert "--phase-ensemble" in manifest and "phase-ensemble(s=4" in manifest
    # resuming the same directory without the ensemble is refused: a different model
    again = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "ens")])
    assert again.exit_code != 0
