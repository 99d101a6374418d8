"""report.html and compare.html as a reader sees them: laid out in headless Chromium at 1280 px
and 400 px (tests/browser.py), each page opens with its verdict (the same sentences analyze
prints) and, on a wide screen, its per-phase table; nothing scrolls sideways or sticks out;
every figure loads and fits. A planted effect, a floor run, a ceiling run and their comparison
(tests/page_runs.py); the lm-eval run's page is checked in tests/test_lm_eval.py."""

import json

import numpy as np
import pytest
from matplotlib.image import imread

from browser import HEIGHT, look, problems
from page_runs import MODELS, sweep_pages
from phasescope.backends.logits import callable_name

WIDTHS = (1280, 400)


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    # a long directory name, as real runs have: paths on the page must wrap at 400 px
    return sweep_pages(tmp_path_factory.mktemp("pages") / ("a_directory_with_a_long_name_" * 3))


def verdict_sentence(page) -> str:
    return json.loads((page.parent / "metrics.json").read_text())["verdict"]["sentence"]


def assert_screenshot(path, width):
    pixels = imread(path)
    assert pixels.shape[:2] == (HEIGHT, width)
    assert np.std(pixels) > 0.05  # not a blank page


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", list(MODELS))
def test_a_report_opens_with_its_verdict_and_fits_the_screen(pages, chrome, name, width, tmp_path):
    facts = look(chrome, pages[name], width, tmp_path / "shot.png")
    assert problems(facts, width) == []
    assert facts["verdict_text"] == f"Verdict: {verdict_sentence(pages[name])}"
    assert len(facts["figures"]) >= 3
    assert_screenshot(tmp_path / "shot.png", width)


@pytest.mark.parametrize("width", WIDTHS)
def test_compare_opens_with_every_runs_verdict(pages, chrome, width, tmp_path):
    facts = look(chrome, pages["compare"], width, tmp_path / "shot.png")
    assert problems(facts, width) == []
    first = next(iter(MODELS))
    assert facts["verdict_text"] == f"{first}: {verdict_sentence(pages[first])}"
    page = pages["compare"].read_text()
    for name in MODELS:  # every run's verdict before the runs' list and the table
        assert page.index(f"<b>{name}:</b>") < page.index("<h2>Runs</h2>")
    assert_screenshot(tmp_path / "shot.png", width)


def test_the_checks_find_what_a_broken_page_has(pages, chrome, tmp_path):
    """The checks can fail: a page without its verdict, with a table too wide to scroll and a
    figure that does not load, is caught on each count."""
    page = pages["ceiling"].read_text()
    broken = page.replace('class="verdict"', 'class="other"').replace(
        "<h1>", '<div style="width:2000px">wide</div><img alt="missing.png" src="missing.png"><h1>'
    )
    (tmp_path / "report.html").write_text(broken)
    found = problems(look(chrome, tmp_path / "report.html", 400, tmp_path / "shot.png"), 400)
    assert "no verdict on the page" in found
    assert any(p.startswith("the page scrolls sideways") for p in found)
    assert any(p.startswith("sticks out of the screen: div: wide") for p in found)
    assert "figure missing.png did not load" in found


def test_a_callable_is_named_by_its_module_and_name_not_its_address():
    assert callable_name(MODELS["floor"]) == "page_runs.always_wrong"
    assert callable_name(MODELS["ceiling"]) == "test_sweep.Planted"
