"""Every benchmark imports and runs: its ``--quick`` smoke (the smallest sizes) in this process,
so a benchmark that docs/performance.md cites cannot rot unnoticed (sweep_overhead.py once
failed to import while `make bench` ran it)."""

import runpy
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SMOKES = {  # benchmark: (arguments, a phrase its output must hold)
    "analyze_scale.py": (["--quick"], "the same numbers as the previous code: True"),
    "attention.py": (["--quick", "--prefill-only"], "T="),
    "attention_stages.py": (["--quick"], "_add_entries"),
    "content_build.py": (["--quick"], "items built and checked"),
    "long_forward.py": (["--quick"], "compressed / full"),
    "multi_token_scoring.py": (["--quick"], "where read"),
    "multi_token_sweep.py": (["--quick"], "multi-token answers (numbers):"),
    "niah.py": (["native", "--quick"], "items of 1,024 tokens"),
    "padding_search.py": (["--quick"], "| True"),
    "phase_ensemble.py": (["--quick"], "the ensemble costs"),
    "prefill_ab.py": (["--quick"], "compressed / full prefill time"),
    "scale.py": (["--quick"], "merged records equal the unsplit ones (keys, prompt digests, grades): True"),
    "served.py": (["--quick"], "the three paths' log-probs equal: True"),
    "sweep_overhead.py": (["--quick"], "overhead"),
    "sweep_startup.py": (["--quick"], "| this code |"),
    "sweep_prefix.py": (["--quick"], "speed-up"),
    "training.py": (["--quick"], "tokens/s"),
}


def test_every_benchmark_has_a_smoke():
    assert set(SMOKES) == {p.name for p in BENCHMARKS.glob("*.py")}


@pytest.mark.parametrize("name", sorted(SMOKES))
def test_benchmark_quick_smoke(name, monkeypatch, capsys, tmp_path):
    args, phrase = SMOKES[name]
    monkeypatch.chdir(tmp_path)  # a benchmark that writes files writes them here
    monkeypatch.setattr(sys, "argv", [name, *args])
    runpy.run_path(str(BENCHMARKS / name), run_name="__main__")
    assert phrase in capsys.readouterr().out
