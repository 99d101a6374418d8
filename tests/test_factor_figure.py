"""The figure of the factor the verdict names (reporting/factor_figure.py, issue #59 item 1): a
planted prompt-end effect is drawn in the first panel, its planted residue the red bar; a run
without factor tests draws nothing; the report puts the figure first when the verdict leads with
a factor."""

import numpy as np
import pytest

from phasescope.analysis.simulate_factors import FactorScenario, simulate_factors
from phasescope.analysis.stats import analyze_arrays
from phasescope.reporting.factor_figure import factor_effects, factor_tests
from phasescope.reporting.figures import WORST
from phasescope.rundir.metrics import Metrics
from test_figures import outside_the_image, svg_texts


@pytest.fixture(scope="module")
def end_effect() -> Metrics:
    """A crossed sweep whose prompt end at residue 1 mod 4 costs 30 pp; the needle has none."""
    records = simulate_factors(FactorScenario(end_pp=30.0, worst=1), np.random.default_rng(3))
    return Metrics.from_json(analyze_arrays(records, seed=0, n_resamples=200))


def test_the_claimed_factor_comes_first_with_its_planted_residue_red(end_effect, tmp_path):
    assert end_effect.verdict.kind == "factor" and "factor:end" in end_effect.verdict.claims
    tests = factor_tests(end_effect)
    assert tests[0]["name"] == "end" and {t["name"] for t in tests} >= {"needle", "end"}
    worst = tests[0]["worst_phase"]
    align = end_effect.factors.get("align", 0)
    assert (worst + align) % tests[0]["period"] == 1  # the residue planted, as a prompt length

    png = tmp_path / "factor_effects.png"
    assert factor_effects(end_effect, png)
    svg = png.with_suffix(".svg")
    texts = [t.text for t in svg_texts(svg)]
    titles = [t for t in texts if ": claimed" in t or ": not claimed" in t]
    assert titles[0].startswith("prompt end: claimed") and any(t.startswith("needle: not claimed") for t in titles)
    assert "prompt length mod 4" in texts
    assert any(t.endswith("pp vs") for t in texts)  # the verdict's "vs the other phases" number on its bar
    assert outside_the_image(svg) == []
    red = svg.read_text().count(_svg_colour(WORST))
    assert red >= 1  # one red bar: the claimed worst residue


def test_no_factor_tests_no_figure(tmp_path):
    from test_figures import hand_metrics

    assert not factor_effects(hand_metrics(), tmp_path / "f.png")
    assert not (tmp_path / "f.png").exists()


def test_the_report_shows_the_named_factor_first(end_effect, tmp_path, monkeypatch):
    from phasescope.reporting import html

    monkeypatch.setattr(html, "_page", lambda run_dir, metrics, spec, images: "\n".join(images))
    monkeypatch.setattr(html.RunDir, "read_sweep", lambda self: None)
    page = html.write_report(tmp_path, end_effect).read_text()
    assert page.index("factor_effects") < page.index("phase_accuracy")


def _svg_colour(name: str) -> str:
    from matplotlib.colors import to_hex

    return to_hex(name).lower()


def test_the_needle_by_end_heatmap_shows_the_planted_column(end_effect, tmp_path):
    """#59 item 1: a crossed run gets accuracy per (needle phase, prompt length mod 4) cell; the
    planted prompt-end residue is the lowest column in every row, and the cells' counts add up."""
    from phasescope.reporting.factor_figure import needle_end_heatmap

    grid = end_effect.factors["grid"]
    accuracy = np.array(grid["accuracy"], dtype=float)
    align = end_effect.factors.get("align", 0)
    column = next(m for m in range(4) if (m + align) % 4 == 1)
    assert all(np.argmin(row) == column for row in accuracy)
    assert sum(map(sum, grid["n"])) == end_effect.n_records
    png = tmp_path / "needle_by_end.png"
    assert needle_end_heatmap(end_effect, png)
    svg = png.with_suffix(".svg")
    assert outside_the_image(svg) == []
    assert "prompt length mod 4" in [t.text for t in svg_texts(svg)]


def test_no_heatmap_where_the_needle_and_the_end_move_together(tmp_path):
    """A shift-needle run (the prompt end held) has no grid and no heatmap."""
    from phasescope.reporting.factor_figure import needle_end_heatmap

    records = simulate_factors(FactorScenario(design="shift-needle"), np.random.default_rng(4))
    metrics = Metrics.from_json(analyze_arrays(records, seed=0, n_resamples=100))
    assert (metrics.factors or {}).get("grid") is None
    assert not needle_end_heatmap(metrics, tmp_path / "g.png")


def test_a_run_of_several_length_bands_gets_its_gap_by_band_first(end_effect, tmp_path, monkeypatch):
    """#59 item 1: a sweep over lengths (--context-tokens A,B) is read band by band; its report opens
    with each band's gap and interval."""
    from dataclasses import replace

    from phasescope.reporting import html

    bands = {"4,096 tokens": {"gap_pp": 3.0, "gap_ci_pp": [0.0, 7.0], "verdict": "no detectable phase effect"},
             "8,192 tokens": {"gap_pp": 21.0, "gap_ci_pp": [15.0, 27.0], "verdict": "phase effect"}}  # fmt: skip
    monkeypatch.setattr(html, "_page", lambda run_dir, metrics, spec, images: "\n".join(images))
    monkeypatch.setattr(html.RunDir, "read_sweep", lambda self: None)
    page = html.write_report(tmp_path, replace(end_effect, per_band=bands)).read_text()
    assert page.index("gap_by_length_band") < page.index("factor_effects")
    texts = [t.text for t in svg_texts(tmp_path / "figures" / "gap_by_length_band.svg")]
    assert "phase gap per length band" in texts and "8,192 tokens" in texts
