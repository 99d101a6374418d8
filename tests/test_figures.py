"""What a reader sees in report.html's figures (reporting/figures.py): accuracy axes scaled to
the data with the full 0-1 marked, the worst phase red wherever it is and the boundary phase
hatched (not red), integer ticks, every text inside the saved image, an SVG beside each PNG, the
periodogram's note on multiples of the period, and the log-score panel with its intervals."""

import re
import warnings
import xml.etree.ElementTree as ET
from dataclasses import replace

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.textpath import TextPath

from phasescope.analysis.records import RecordArrays
from phasescope.analysis.stats import analyze_arrays
from phasescope.reporting import figures
from phasescope.reporting.figures import BOUNDARY, FIGURES, OTHER, WORST
from phasescope.rundir.metrics import Metrics

STEP = 4
GAP_9PP = (0.60, 0.66, 0.69, 0.64)  # phase 0 worst, phase 3 the boundary


def period(explained: dict) -> dict:
    """A step-period test result: period STEP detected (p = 0.001), ``explained`` its periodogram."""
    tested = sorted(int(p) for p in explained)
    main = {str(p): (0.001 if p == STEP else 0.4) for p in tested if p <= STEP or p % STEP}
    multiples = {str(p): 0.6 for p in tested if p > STEP and p % STEP == 0}
    return {
        "detected": STEP, "p_value": 0.001, "kind": "step", "explained": explained, "trend_degree": 1,
        "tested": tested, "untestable": {}, "note": None, "candidate_p": main, "multiple_ps": multiples,
    }  # fmt: skip


def hand_metrics(acc=GAP_9PP, worst=0, verdict="effect", log_score="margin", explained=None) -> Metrics:
    """Metrics of the current schema, every number chosen: intervals +-3 pp, log-score means in
    nats with +-0.1 intervals. ``verdict``: the verdict's kind ("effect": found, p = 0.001)."""
    mean = float(np.mean(acc))
    phases = [
        {
            "phase": p,
            "n": 240,
            "n_contents": 40,
            "accuracy": a,
            "ci_low": a - 0.03,
            "ci_high": a + 0.03,
            "mean_logprob": -0.5,
            "mean_margin": 1.0 + a - mean,
            "adjusted_accuracy": a + 0.005,
            "effect_pp": 100 * (a - mean),
            "effect_ci_pp": [100 * (a - mean) - 2.5, 100 * (a - mean) + 2.5],
        }
        for p, a in enumerate(acc)
    ]
    offsets = list(range(24))
    found = verdict == "effect"
    m = {
        "step": STEP,
        "n_records": 960,
        "n_contents": 40,
        "n_informative_contents": 40,
        "overall_accuracy": mean,
        "accuracy_interval": "by content",
        "model": "two stages",
        "trend_degree": 1,
        "trend": None,
        "gap_plugin_pp": None,
        "homogeneity_p_value": 0.001,
        "gap_raw_pp": 100 * (max(acc) - min(acc)),
        "inference_note": None,
        "windows": {},
        "phase_dependence": {},
        "candidate_probabilities": {},
        "phases": phases,
        "gap_pp": 100 * (max(acc) - min(acc)),
        "gap_ci_pp": [4.0, 14.0],
        "gap_p_value": 0.001,
        "offsets": offsets,
        "accuracy_by_offset": [acc[d % STEP] + 0.01 * ((d * 7) % 3 - 1) for d in offsets],
        "phase_by_offset": [d % STEP for d in offsets],
        "period": period(explained or {"2": 0.1, "3": 0.02, "4": 0.5, "5": 0.05, "6": 0.12}),
        "log_score": None,
        "verdict": {
            "kind": verdict,
            "sentence": verdict,
            "outcome": "accuracy",
            "unit": "pp",
            "effect": 9.0,
            "effect_ci": [4.0, 14.0],
            "p_value": 0.001 if found else None,
            "worst_phase": worst if found else None,
            "best_phase": None,
            "phase_basis": "drift-adjusted",
            "period": STEP,
            "boundary_phase": STEP - 1,
            "raw_note": None,
            "claims": ["gap", "period"] if found else [],
        },
    }
    if log_score:
        means = [-1.0 + 2 * (a - mean) for a in acc] if log_score == "logprob" else [1.0 + a - mean for a in acc]
        rows = [
            {"phase": p, "n_contents": 40, "mean": v, "ci": [v - 0.1, v + 0.1], "effect": None, "effect_ci": None}
            for p, v in enumerate(means)
        ]
        m["log_score"] = {
            "outcome": log_score, "unit": "nats", "n_records": 960, "phases": rows, "gap": 0.2, "gap_ci": [0.1, 0.3],
            "gap_p_value": 0.001, "homogeneity_p_value": 0.001, "trend_degree": 1, "period": period({}), "note": None,
        }  # fmt: skip
    return Metrics.from_json(m)


@pytest.fixture
def drawn(monkeypatch):
    """The figures drawn, kept open for inspection after _save wrote them."""
    kept = []
    save = figures._save

    def keep(fig, path, **kwargs):
        kept.append(fig)
        save(fig, path, **kwargs)

    monkeypatch.setattr(figures, "_save", keep)
    return kept


def bars_by_phase(ax) -> dict:
    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    return {round(b.get_x() + b.get_width() / 2): b for b in bars}


def marks_by_phase(ax) -> dict:
    """phase -> (colour as RGB, boundary marked) of the per-phase bars, or of the squares drawn
    instead of bars on an axis that does not start at 0 (boundary: outlined in black)."""
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    if bars:
        return {p: (b.get_facecolor()[:3], b.get_hatch() == BOUNDARY) for p, b in bars_by_phase(ax).items()}
    squares = [line for line in ax.lines if line.get_marker() == "s"]
    return {
        round(line.get_xdata()[0]): (to_rgba(line.get_color())[:3], to_rgba(line.get_markeredgecolor()) == (0, 0, 0, 1))
        for line in squares
    }


def svg_texts(path) -> list[ET.Element]:
    return [e for e in ET.parse(path).iter() if e.tag.endswith("}text")]


def tick_labels(path, axis="x") -> list[str]:
    root = ET.parse(path).getroot()
    groups = [g for g in root.iter() if g.tag.endswith("}g") and g.get("id", "").startswith(f"{axis}tick_")]
    return [t.text for g in groups for t in g.iter() if t.tag.endswith("}text")]


def outside_the_image(path, margin=3.0) -> list[str]:
    """Texts of the saved SVG that come closer than ``margin`` pt to its edges. The SVG keeps
    text as text, so each glyph box is measured with the same font; the margin because a raster
    renders text a little wider (hinting): the old periodogram's y label ended 2 pt from the top
    of its SVG and lost its last letter in the PNG."""
    root = ET.parse(path).getroot()
    width, height = (float(root.get(k).removesuffix("pt")) for k in ("width", "height"))
    cut = []
    for t in svg_texts(path):
        style, transform = t.get("style", ""), t.get("transform", "")
        size = float(re.search(r"font-size: ([\d.]+)px", style).group(1))
        box = TextPath((0, 0), t.text, size=size).get_extents()  # x along the baseline, y up
        anchor = (re.search(r"text-anchor: (\w+)", style) or [0, "start"])[1]
        shift = {"start": 0.0, "middle": 0.5, "end": 1.0}[anchor] * box.x1
        if t.get("x") is not None:
            x, y = float(t.get("x")), float(t.get("y"))
        else:
            x, y = map(float, re.search(r"translate\(([-\d.e]+) ([-\d.e]+)\)", transform).groups())
        angle = np.radians(float((re.search(r"rotate\((-?[\d.]+)", transform) or [0, 0])[1]))
        along, up = np.array([np.cos(angle), np.sin(angle)]), np.array([np.sin(angle), -np.cos(angle)])  # y down
        corners = [np.array([x, y]) + (a - shift) * along + b * up for a in (box.x0, box.x1) for b in (box.y0, box.y1)]
        if any(not (margin <= cx <= width - margin and margin <= cy <= height - margin) for cx, cy in corners):
            cut.append(t.text)
    return cut


def test_a_9pp_gap_fills_the_axis_and_the_label_and_strip_say_which_part_of_0_1(drawn, tmp_path):
    figures.phase_accuracy(hand_metrics(), tmp_path / "phase_accuracy.png")
    ax = drawn[0].axes[0]
    bottom, top = ax.get_ylim()
    lowest, highest = min(GAP_9PP) - 0.03, max(GAP_9PP) + 0.03  # bars' interval ends
    assert lowest - 0.1 < bottom < lowest and highest < top < highest + 0.1
    assert top - bottom < 0.35  # not 0..1: the 9 pp are a visible share of the axis
    assert re.fullmatch(r"accuracy \(axis 0\.\d\d–0\.\d\d of 0–1\)", ax.get_ylabel())
    (strip,) = ax.child_axes  # the whole 0-1 with the shown window shaded
    assert strip.get_ylim() == (0, 1)
    (window,) = strip.patches
    shaded = window.get_extents().transformed(strip.transData.inverted())
    assert shaded.y0 == pytest.approx(bottom, abs=1e-6) and shaded.y1 == pytest.approx(top, abs=1e-6)


def test_an_axis_that_needs_all_of_0_1_has_no_strip(drawn, tmp_path):
    figures.phase_accuracy(hand_metrics(acc=(0.05, 0.5, 0.9, 0.97)), tmp_path / "phase_accuracy.png")
    ax = drawn[0].axes[0]
    assert ax.get_ylabel() == "accuracy" and not ax.child_axes
    assert [c for c in ax.containers if isinstance(c, BarContainer)]  # an axis from 0: bars


def test_an_axis_cut_above_0_draws_dots_not_bars(drawn, tmp_path):
    """Bars on an axis from 0.53 make an 8 pp gap look several times larger: squares instead."""
    figures.phase_accuracy(hand_metrics(), tmp_path / "phase_accuracy.png")
    ax = drawn[0].axes[0]
    assert ax.get_ylim()[0] > 0 and not [c for c in ax.containers if isinstance(c, BarContainer)]
    assert sorted(marks_by_phase(ax)) == list(range(STEP))
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("dots: axis cut above 0" in text for text in legend)


@pytest.mark.parametrize(
    ("acc", "verdict", "worst"),
    [
        (GAP_9PP, "effect", 1),  # the verdict's worst phase, even where its raw bar is not the lowest
        ((0.66, 0.69, 0.64, 0.60), "effect", 3),  # worst and boundary: red and hatched
    ],
)
def test_the_worst_phase_is_red_and_the_boundary_only_marked(drawn, tmp_path, acc, verdict, worst):
    metrics = hand_metrics(acc=acc, worst=worst, verdict=verdict)
    figures.phase_accuracy(metrics, tmp_path / "phase_accuracy.png")
    figures.margin_by_phase(metrics, tmp_path / "margin_by_phase.png")
    for fig in drawn:
        marks = marks_by_phase(fig.axes[0])
        assert sorted(marks) == list(range(STEP))
        for phase, (colour, boundary) in marks.items():
            assert colour == to_rgba(WORST if phase == worst else OTHER)[:3], (phase, fig)
            assert boundary == (phase == STEP - 1)
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert any(text.startswith(f"worst phase {worst} (") for text in legend)
        assert any(text.startswith(f"boundary phase {STEP - 1} (") for text in legend)


def test_no_phase_is_red_when_every_phase_is_equal(drawn, tmp_path):
    figures.phase_accuracy(hand_metrics(acc=(1.0,) * 4, verdict="ceiling"), tmp_path / "phase_accuracy.png")
    marks = marks_by_phase(drawn[0].axes[0])
    assert len(marks) == 4 and all(colour == to_rgba(OTHER)[:3] for colour, _ in marks.values())


def test_no_phase_is_red_when_the_verdict_found_no_effect(drawn, tmp_path):
    """The tables' rule: a run without a detected effect (here a ceiling run whose margin shows
    none) has a lowest phase, not a worst one."""
    metrics = hand_metrics()
    no_claim = replace(metrics.verdict, kind="ceiling", p_value=0.68, outcome="margin", claims=[])
    metrics = replace(metrics, verdict=no_claim)
    figures.phase_accuracy(metrics, tmp_path / "phase_accuracy.png")
    figures.margin_by_phase(metrics, tmp_path / "margin_by_phase.png")
    for fig in drawn:
        marks = marks_by_phase(fig.axes[0])
        assert len(marks) == 4 and all(colour == to_rgba(OTHER)[:3] for colour, _ in marks.values())


def test_offsets_take_the_colours_of_their_phases(drawn, tmp_path):
    metrics = hand_metrics(worst=1)
    figures.offset_accuracy(metrics, tmp_path / "offset_accuracy.png")
    ax = drawn[0].axes[0]
    dots = {line.get_label(): line for line in ax.get_lines() if line.get_linestyle() == "None"}
    worst = dots["worst phase 1 (drift-adjusted accuracy)"]
    assert worst.get_color() == WORST and list(worst.get_xdata()) == list(range(1, 24, STEP))
    boundary = dots[f"boundary phase {STEP - 1}"]
    assert boundary.get_color() == OTHER and boundary.get_marker() == figures.BOUNDARY_MARKER
    assert list(boundary.get_xdata()) == list(range(STEP - 1, 24, STEP))
    acc = metrics.accuracy_by_offset
    bottom, top = ax.get_ylim()
    assert min(acc) - 0.1 < bottom < min(acc) and max(acc) < top < max(acc) + 0.1
    assert "of 0–1" in ax.get_ylabel()


def test_every_figure_has_integer_ticks_an_svg_beside_it_and_no_text_cut_off(tmp_path):
    metrics = hand_metrics(explained={"2": 0.1, "3": 0.02, "4": 0.5, "6": 0.12, "8": 0.55, "12": 0.6})
    for name, draw in FIGURES.items():
        png = tmp_path / name
        draw(metrics, png)
        svg = png.with_suffix(".svg")
        assert png.read_bytes().startswith(b"\x89PNG") and svg.exists(), name
        labels = tick_labels(svg)
        assert labels and all(re.fullmatch(r"\d+", label) for label in labels), (name, labels)
        assert outside_the_image(svg) == [], name


def test_the_compare_offsets_plot_marks_each_runs_phases(drawn, tmp_path):
    """#59 item 6: each point's marker is its run's needle phase, so a dip at offsets 2, 6, 10 reads
    as the phase it is in that run (here phase 1 in run b, whose offsets start at phase 3)."""
    curves = {
        "a": ([0, 1, 2, 3], [0.5, 0.6, 0.4, 0.6], [0, 1, 2, 3]),
        "b": ([0, 1, 2, 3], [0.5, 0.6, 0.4, 0.6], [3, 0, 1, 2]),
    }
    figures.offset_overlay(curves, tmp_path / "offsets.png")
    ax = drawn[0].axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["a", "b", "phase 0", "phase 1", "phase 2", "phase 3"]
    dips = [line.get_marker() for line in ax.lines if list(line.get_xdata()) == [2]]
    assert dips == [figures.PHASE_MARKERS[2], figures.PHASE_MARKERS[1]]


def test_compare_figures_are_saved_as_svg_too(tmp_path):
    figures.offset_overlay({"a": ([0, 1, 2], [0.5, 0.6, 0.7])}, tmp_path / "offsets.png")
    figures.gap_forest([("a", 5.0, [1.0, 9.0]), ("b", None, None)], tmp_path / "gaps.png")
    assert {p.name for p in tmp_path.iterdir()} == {"offsets.png", "offsets.svg", "gaps.png", "gaps.svg"}


def test_the_periodogram_draws_every_period_tested_multiples_included(tmp_path):
    """#59 item 3: the multiples of the step the test tried are drawn (hatched) beside the others,
    and the title is the verdict's claim."""
    shares = {"2": 0.1, "3": 0.02, "4": 0.5, "5": 0.05, "6": 0.12, "8": 0.55, "12": 0.6}
    figures.periodogram(hand_metrics(explained=shares), tmp_path / "periodogram.png")
    svg = tmp_path / "periodogram.svg"
    assert outside_the_image(svg) == []
    texts = " ".join(t.text for t in svg_texts(svg))
    assert "-log10 p" in texts and "period 4 claimed" in texts
    assert tick_labels(svg) == ["2", "3", "4", "5", "6", "8", "12"]


@pytest.mark.parametrize(("outcome", "ylabel"), [("margin", "mean margin (nats)"), ("logprob", "mean log p (nats)")])
def test_the_log_score_panel_shows_each_phase_mean_with_its_interval(drawn, tmp_path, outcome, ylabel):
    metrics = hand_metrics(log_score=outcome)
    figures.margin_by_phase(metrics, tmp_path / "margin_by_phase.png")
    ax = drawn[0].axes[0]
    assert ax.get_ylabel() == ylabel
    (errors,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    (caps,) = errors.lines[2]  # the vertical interval segments, one per phase
    ends = sorted((float(s[:, 1].min()), float(s[:, 1].max())) for s in caps.get_segments())
    expected = sorted(tuple(r.ci) for r in metrics.log_score.phases)
    assert np.allclose(ends, expected)
    zero_line = [line for line in ax.get_lines() if list(line.get_ydata()) == [0, 0]]
    assert bool(zero_line) == (outcome == "margin")


def test_the_margin_panel_without_a_log_score_has_bare_means(drawn, tmp_path):
    metrics = hand_metrics(verdict="no detectable effect", log_score=None)
    figures.margin_by_phase(metrics, tmp_path / "margin_by_phase.png")
    ax = drawn[0].axes[0]
    assert not [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    heights = {p: bar.get_height() for p, bar in bars_by_phase(ax).items()}
    assert heights == {r.phase: pytest.approx(r.mean_margin) for r in metrics.phases}
    assert ax.get_ylabel() == "mean margin (nats)"


@pytest.fixture(scope="module")
def analysed() -> Metrics:
    """metrics of a simulated run: 40 contents x 16 offsets, phase 0 worst, margins recorded."""
    rng = np.random.default_rng(0)
    content, offset = np.repeat(np.arange(40), 16), np.tile(np.arange(16), 40)
    phase = offset % STEP
    correct = (rng.random(len(content)) < np.array(GAP_9PP)[phase]).astype(float)
    r = RecordArrays.from_arrays(STEP, content, offset, phase, correct)
    r.margin = rng.normal(1.0, 1.0, len(content)) - 0.3 * (phase == 0)
    return Metrics.from_json(analyze_arrays(r, n_resamples=99))


def test_the_figures_of_an_analysed_run_draw_without_warnings(analysed, tmp_path):
    metrics = analysed
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name, draw in FIGURES.items():
            draw(metrics, tmp_path / name)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [*FIGURES, *(name.replace(".png", ".svg") for name in FIGURES)]
    )


@pytest.mark.parametrize("acc", [(1.0, 0.99, 1.0, 0.98), (0.0, 0.01, 0.0, 0.02), (0.05, 0.5, 0.9, 0.97)])
def test_no_accuracy_tick_lies_outside_0_1(drawn, tmp_path, acc):
    """The margin that keeps a bar at 0 or 1 off the frame is never labelled as accuracy 1.02 or -0.02."""
    figures.phase_accuracy(hand_metrics(acc=acc), tmp_path / "phase_accuracy.png")
    ax = drawn[0].axes[0]
    ticks = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
    assert ticks and all(0 <= t <= 1 for t in ticks), ticks


def test_the_offsets_curve_carries_a_band_clustered_by_content(analysed, drawn, tmp_path):
    """#46 item 1: the curve is the mean of these contents; its band says how far another sample of
    contents could move it at each offset (cluster_proportion per offset, 40 contents here)."""
    ci, acc = analysed.accuracy_ci_by_offset, analysed.accuracy_by_offset
    assert len(ci) == len(acc) == len(analysed.offsets)
    assert all(low < a < high for (low, high), a in zip(ci, acc, strict=True))
    assert all(0.1 < high - low < 0.5 for low, high in ci)  # 40 contents, one record each: ~ +-15 pp
    figures.offset_accuracy(analysed, tmp_path / "offset_accuracy.png")
    ax = drawn[0].axes[0]
    (band,) = [c for c in ax.collections if c.get_label() == "95% over contents"]
    bottom, top = ax.get_ylim()
    assert bottom <= min(low for low, _ in ci) and top >= max(high for _, high in ci)
    few = replace(analysed, accuracy_ci_by_offset=[[None, None]] * len(acc))  # under 10 contents: no band
    figures.offset_accuracy(few, tmp_path / "few.png")
    assert not [c for c in drawn[1].axes[0].collections if c.get_label() == "95% over contents"]


@pytest.mark.parametrize(("flat", "edge"), [(0.0, "bottom"), (1.0, "top")])
def test_a_floor_or_ceiling_run_sits_on_the_axis_edge_not_mid_axis(flat, edge):
    """#46 item 1: every offset at 0 drew the points mid-axis on an axis from -0.02 to 0.02."""
    bottom, top = figures._unit_window(flat, flat)
    assert top - bottom == pytest.approx(figures.MIN_WINDOW)
    near = (flat - bottom) if edge == "bottom" else (top - flat)  # the points' distance from their edge
    assert 0 <= near <= 0.02 + 1e-9


def _run(accuracy_by_phase, n_contents=80, n_offsets=24, seed=3) -> Metrics:
    rng = np.random.default_rng(seed)
    content, offset = np.repeat(np.arange(n_contents), n_offsets), np.tile(np.arange(n_offsets), n_contents)
    phase = offset % STEP
    correct = (rng.random(len(content)) < np.array(accuracy_by_phase)[phase]).astype(float)
    return Metrics.from_json(
        analyze_arrays(RecordArrays.from_arrays(STEP, content, offset, phase, correct), n_resamples=200)
    )


def test_the_periodogram_bars_cross_the_line_exactly_when_the_test_rejects(drawn, tmp_path):
    """#59 item 3: the bars are the p-values the test used (each candidate against the null of the
    smallest p over all of them), so the test's p is the smallest bar's and a bar crosses alpha
    exactly when the test rejects. Before, a planted period-4 bar could sit below its own "noise"
    tick under p < 0.001 (the tick was a share of variance, not the test's statistic)."""
    planted = _run((0.5, 0.7, 0.7, 0.7))
    tested = {int(p): v for p, v in planted.period.candidate_p.items()}
    assert planted.period.p_value == min(tested.values()) < 0.05
    assert planted.verdict.period == STEP and tested[STEP] == planted.period.p_value
    figures.periodogram(planted, tmp_path / "periodogram.png")
    ax = drawn[0].axes[0]
    line = -np.log10(figures.ALPHA_LINE)
    labels = [int(label.get_text()) for label in ax.get_xticklabels()]
    heights = dict(zip(labels, [patch.get_height() for patch in ax.patches], strict=True))
    colours = dict(zip(labels, [patch.get_facecolor() for patch in ax.patches], strict=True))
    assert heights[STEP] > line and colours[STEP] == to_rgba(figures.PERIOD)
    assert all(h <= line for p, h in heights.items() if tested[p] >= figures.ALPHA_LINE)
    assert ax.get_title().startswith(f"period {STEP} claimed")
    for seed in range(3):
        flat = _run((0.6, 0.6, 0.6, 0.6), seed=seed)
        crossing = [p for p, v in flat.period.candidate_p.items() if v < figures.ALPHA_LINE]
        assert bool(crossing) == (flat.period.p_value < figures.ALPHA_LINE)
