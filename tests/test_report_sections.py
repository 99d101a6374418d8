"""report.html's optional sections (reporting/sections.py): ablation.json, preferences.json and
theory.json in a run directory each add a section with figures and their numbers; without the
files the report is the base report."""

import json
import re
import shutil
from importlib.resources import files

import numpy as np
import pytest

import phasescope
from phasescope.analysis.heads import head_statistics
from phasescope.theory.run import run_theory
from test_sweep import TASK, planted_model

N_CONTENTS, OFFSETS, STEP = 12, 8, 4


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A tiny analysed sweep run (planted model: phase 3 always wrong)."""
    run = tmp_path_factory.mktemp("base") / "run"
    phasescope.sweep(planted_model(), task=TASK, samples=2, offsets=range(OFFSETS), out=run)
    phasescope.analyze(run, n_resamples=100)
    return run


@pytest.fixture
def run(base_run, tmp_path):
    shutil.copytree(base_run, tmp_path / "run")
    return tmp_path / "run"


def ablation_result() -> dict:
    """The shape `phasescope ablate` writes, from head_statistics on planted differences: removing
    L0H0 costs every record at phase 3 (specialized), L0H1 changes nothing, L1H0 is noise."""
    contents = np.repeat(np.arange(N_CONTENTS), OFFSETS)
    phases = np.tile(np.arange(OFFSETS) % STEP, N_CONTENTS)
    rng = np.random.default_rng(0)
    planted = np.where(phases == 3, -1.0, 0.0)
    noise = rng.choice([-1.0, 0.0, 1.0], size=phases.shape, p=[0.1, 0.8, 0.1])
    per_head = {
        (0, 0): {"accuracy": planted, "logprob": 3 * planted},
        (0, 1): {"accuracy": np.zeros(phases.shape), "logprob": np.zeros(phases.shape)},
        (1, 0): {"accuracy": noise, "logprob": noise},
    }
    heads = head_statistics(per_head, phases, contents, STEP, n_permutations=200)
    blank = json.loads(json.dumps(heads[1]))  # a head whose statistics had no data: every number None
    blank["layer"], blank["head"] = 1, 1
    for metric in ("accuracy", "logprob"):
        blank[metric].update(index=None, preferred_phase=None, p_value=None, p_holm=None, specialized=False)
        blank[metric]["change_by_phase"][2].update(mean=None, ci_low=None, ci_high=None, n_contents=0)
    return {
        "mode": "zero",
        "step": STEP,
        "offsets": list(range(OFFSETS)),
        "samples": N_CONTENTS,
        "seed": 0,
        "n_permutations": 200,
        "alpha": 0.05,
        "baseline": [{"phase": p, "accuracy": [0.64, 0.61, 0.69, None][p]} for p in range(STEP)],
        "heads": [*heads, blank],
        "note": "change = ablated − unablated on the same items",
        "model": "planted-tiny",
        "causal": [
            {
                "phase": 3,
                "heads": [[0, 0]],
                "k": 1,
                "contrast": 0.4167,
                "ci_low": 0.2,
                "ci_high": 0.6,
                "n_contents": 6,
                "p_value": 0.004,
            },
            {
                "phase": 0,
                "heads": [[1, 0], [0, 1]],
                "k": 2,
                "contrast": None,
                "ci_low": None,
                "ci_high": None,
                "n_contents": 0,
                "p_value": None,
            },
        ],
        "a_key_from_the_future": {"ignored": True},
    }


def row(page: str, first_cell: str) -> str:
    match = re.search(rf"<tr><td>{re.escape(first_cell)}</td>.*?</tr>", page)
    assert match, f"no table row starting with {first_cell}"
    return match.group(0)


def embedded(page: str, run, name: str) -> bool:
    """The figure file was written and is the image embedded under its name."""
    import base64

    data = base64.b64encode((run / "figures" / name).read_bytes()).decode()
    return f'<img alt="{name}" src="data:image/png;base64,{data}">' in page


def test_no_section_files_no_sections(run):
    page = phasescope.report(run).read_text()
    assert page.count("data:image/png;base64,") == 4
    for title in ("Head ablation", "Learned position preferences", "Gradient-flow theory", "not shown"):
        assert title not in page


def test_ablation_section_heatmap_table_and_causal_contrast(run):
    result = ablation_result()
    (run / "ablation.json").write_text(json.dumps(result))
    page = phasescope.report(run).read_text()
    assert "<h2>Head ablation</h2>" in page and "of planted-tiny" in page
    assert embedded(page, run, "ablation_heatmap.png") and page.count("data:image/png;base64,") == 5
    assert "baseline accuracy by phase: 0: 64%  1: 61%  2: 69%  3: not estimable" in page
    planted = row(page, "L0H0")
    acc = result["heads"][0]["accuracy"]
    assert acc["specialized"] and acc["index"] == 1.0 and acc["preferred_phase"] == 3
    assert "SPECIALIZED" in planted and "<td>100.0</td><td>3</td>" in planted
    assert f"<td>{acc['p_holm']:.3g}</td><td>SPECIALIZED</td>" in planted
    assert "SPECIALIZED" not in row(page, "L0H1")
    assert "<td>L0H1</td><td>0.0</td>" in page
    assert "<td>L1H1</td><td>not estimable</td><td>not estimable</td>" in page  # None values
    assert "Causal contrast per phase" in page
    assert "<td>3</td><td>L0H0</td><td>1</td><td>+41.7 [20.0, 60.0]</td><td>6</td><td>0.004</td>" in page
    assert "<td>0</td><td>L1H0, L0H1</td><td>2</td><td>not estimable</td><td>0</td><td>not estimable</td>" in page
    assert "a_key_from_the_future" not in page


def test_ablation_without_causal_has_no_causal_table(run):
    result = ablation_result()
    del result["causal"], result["model"]
    (run / "ablation.json").write_text(json.dumps(result))
    page = phasescope.report(run).read_text()
    assert "<h2>Head ablation</h2>" in page and "Causal contrast" not in page


def test_preferences_written_into_the_run_dir_by_the_cli(run):
    """`phasescope preferences --out RUN --run RUN` -> the run's report shows the section."""
    from typer.testing import CliRunner

    from phasescope.cli import app

    model = str(files("phasescope") / "assets" / "demo" / "tiny-s4")
    args = ["preferences", "--model", model, "--out", str(run), "--run", str(run), "--rows", "4"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert f"phasescope report {run}" in result.output  # says how it reaches the report
    prefs = json.loads((run / "preferences.json").read_text())
    page = phasescope.report(run).read_text()
    assert "<h2>Learned position preferences</h2>" in page and embedded(page, run, "preferences.png")
    layer = prefs["layers"][1]
    eff = layer["effective"]
    assert "<caption>layer 1 (scalar_gate, s=4 w=4)</caption>" in page
    assert "<th>slot 3 (phase 3)</th>" in page
    assert f"<td>{eff['mean'][0][3]:.3f} [{eff['ci_low'][0][3]:.3f}, {eff['ci_high'][0][3]:.3f}]</td>" in page
    assert f"<td>learned</td><td>{layer['learned'][0][0]:.3f}</td>" in page
    rho = prefs["run_comparison"]["rho"]
    assert rho is not None and f"Spearman rho (mean weight per phase vs accuracy per phase) = {rho:.2f}" in page
    accuracy = prefs["run_comparison"]["accuracy"]
    assert f"<td>3</td><td>{accuracy[3]:.3f}</td>" in page


def test_theory_section_figures_and_headline_numbers(run):
    result = run_theory(step=4, n_starts=2, seed=0, horizon=50.0)
    (run / "theory.json").write_text(json.dumps(result))
    page = phasescope.report(run).read_text()
    assert "<h2>Gradient-flow theory</h2>" in page
    for name in ("trajectories", "quality", "gap_vs_step", "stability"):
        assert embedded(page, run, f"theory_{name}.png")
    main = result["main"]
    assert f"critical capacity d* = {main['critical_capacity']:.1f}" in page
    assert f"broke symmetry in {100 * main['broken_fraction']:.0f}% of starts" in page
    for r in result["by_step"]:
        assert f"<td>{r['step']}</td><td>{r['gap_pp_mean']:.1f} ± {r['gap_pp_sd']:.1f}</td>" in page
    result["main"]["critical_capacity"] = None
    (run / "theory.json").write_text(json.dumps(result))
    assert "critical capacity d* = not estimable" in phasescope.report(run).read_text()


def test_a_file_of_another_shape_is_a_note_not_a_failed_report(run):
    (run / "ablation.json").write_text(json.dumps({"heads": [{"layer": 0, "head": 0}]}))
    (run / "theory.json").write_text("{not json")
    page = phasescope.report(run).read_text()
    assert "not shown:" in page and "does not have the shape `phasescope ablate` writes" in page
    assert "theory.json: the phasescope theory output is not valid JSON" in page
    assert page.count("data:image/png;base64,") == 4  # the base report is whole
    (run / "ablation.json").write_text(json.dumps({"foo": 1}))  # valid JSON, nothing ablate writes
    page = phasescope.report(run).read_text()
    assert "does not have the shape `phasescope ablate` writes (ValueError: missing heads, baseline" in page
    assert "ablation of 0 heads" not in page


def test_the_spec_table_reads_any_spec_json():
    """report.html's "What was swept": the rows a spec.json supports, old layouts included."""
    from phasescope.reporting.spec_table import spec_rows
    from phasescope.rundir.saved import SavedSweep

    def rows_of(data: dict):
        return spec_rows(SavedSweep.from_json(data, "spec.json"))

    assert rows_of({}) == [("model", "not recorded")]  # records adopted or made by hand
    old = {"probe": {"probe": "kv-retrieval"}, "offsets": [0, 1, 2, 3, 5], "samples": 8, "seed": 2, "step": 4}
    rows = dict(rows_of(old | {"window": 4, "align": 0}))
    assert rows["probe"] == "kv-retrieval" and rows["offsets"] == "0,1,2,3,5 (5 offsets)"
    assert rows["contents"] == "8 (seed 2)" and rows["geometry"].startswith(
        "step 4, window 4, align 0, raw window L unknown"
    )
    sweep = {
        "model": "hf:m",
        "probe": {"name": "prompts:p.jsonl", "filler": None, "chat_template": True},
        "backend": {"dtype": "bfloat16", "compress": "mean:s=4", "tokenizer": None},
        "remedies": {"phase_ensemble": True, "ensemble_pad_id": 7},
    }
    rows = dict(rows_of({"sweep": sweep}))
    assert rows["model"] == "hf:m" and rows["probe"] == "prompts:p.jsonl (chat_template True)"
    assert (
        rows["model options"] == "dtype bfloat16, compress mean:s=4"
        and rows["remedy"] == "phase ensemble (pad token 7)"
    )


def test_the_report_explains_the_words_it_uses(swept):
    """'homogeneity p', 'plug-in', 'bias-corrected', 'pair@32' and the 'shown part of 0–1' strip
    were unexplained on the page (#46 part 10)."""
    page = phasescope.report(swept).read_text()
    glossary = page[page.index("Words on this page") :]
    for word in ("homogeneity p", "plug-in", "bias-corrected", "pair@32", "shown part of 0&ndash;1", "boundary"):
        assert word in glossary, word
