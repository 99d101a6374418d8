"""A page as headless Chromium lays it out: a screenshot of the first screen and the layout facts
the suite checks (tests/test_pages.py) and docs/pages/make_pages.py records.

Playwright drives the machine's Chromium (no browser download): ``chromium_path()`` finds it
(``PHASESCOPE_CHROMIUM``, else ``chromium`` / ``chromium-browser`` / ``google-chrome`` on PATH);
``make chromium`` installs Debian's. Each page is laid out at an exact viewport (``width`` x
HEIGHT), the size its screenshot has.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HEIGHT = 800  # the first screen's height at every width
# No background networking: this machine's closed network refuses Chromium's own connections.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]

# Measured once the page (its embedded figures decoded) has loaded: the verdict's box, the first
# table's, the page's width against the viewport, the elements that stick out of the viewport
# or spill out of their own box outside anything that scrolls or clips them, and each figure's
# rendered and natural width.
FACTS = """() => {
  const box = el => el.getBoundingClientRect();
  const scrolls = el => ['auto', 'scroll', 'hidden'].includes(getComputedStyle(el).overflowX);
  const inScroller = el => { for (let a = el; a && a !== document.body; a = a.parentElement)
    if (scrolls(a)) return true; return false; };
  const spills = el => box(el).right > innerWidth + 1 || (el.scrollWidth > el.clientWidth + 1 && !scrolls(el));
  const verdict = document.querySelector('.verdict');
  const table = document.querySelector('table');
  return {
    viewport: [innerWidth, innerHeight],
    page_width: document.documentElement.scrollWidth,
    verdict_text: verdict ? verdict.textContent.trim() : null,
    verdict_top: verdict ? box(verdict).top : null,
    verdict_bottom: verdict ? box(verdict).bottom : null,
    first_table_top: table ? box(table).top : null,
    sticking_out: [...document.body.querySelectorAll('*')].filter(el => spills(el) && !inScroller(el))
      .map(el => el.tagName.toLowerCase() + ': ' + (el.textContent || '').trim().slice(0, 60)),
    figures: [...document.images].map(img => ({alt: img.alt, width: box(img).width, natural: img.naturalWidth,
                                              scrolls: inScroller(img)})),
  };
}"""


def chromium_path() -> str | None:
    """The Chromium to drive, or None."""
    named = os.environ.get("PHASESCOPE_CHROMIUM")
    if named:
        return named
    return next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)


@contextmanager
def chromium(path: str) -> Iterator:
    """A headless Chromium (playwright's Browser) at ``path``."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


def look(browser, page: Path, width: int, screenshot: Path) -> dict:
    """``page`` laid out ``width`` px wide: its first screen saved as the PNG ``screenshot``, and
    what FACTS measured."""
    tab = browser.new_page(viewport={"width": width, "height": HEIGHT})
    try:
        tab.goto(page.resolve().as_uri(), wait_until="load")
        tab.screenshot(path=str(screenshot))
        return tab.evaluate(FACTS)
    finally:
        tab.close()


MIN_SCALE = 0.6  # a figure shown at less of its drawn size has unreadable text (at 400 px they were ~45%)


def problems(facts: dict, width: int) -> list[str]:
    """What is wrong with a page's first screen at ``width`` (empty: nothing): the verdict off
    the first screen, the per-phase table too (on a wide screen), a page that scrolls sideways,
    an element that sticks out, a figure that did not load, is wider than the screen (even in a
    box that scrolls: its legend or points end up off-screen), or is shrunk until its text cannot
    be read."""
    found = []
    if facts["viewport"] != [width, HEIGHT]:
        found.append(f"laid out at {facts['viewport']}, not {width} x {HEIGHT}")
    if facts["page_width"] > width:
        found.append(f"the page scrolls sideways: {facts['page_width']} px wide on a {width} px screen")
    found += [f"sticks out of the screen: {what}" for what in facts["sticking_out"]]
    if not facts["verdict_text"]:
        found.append("no verdict on the page")
    elif facts["verdict_bottom"] > HEIGHT:
        found.append(f"the verdict ends at {facts['verdict_bottom']:.0f} px, below the first screen ({HEIGHT} px)")
    if width >= 1000 and (facts["first_table_top"] is None or facts["first_table_top"] >= HEIGHT):
        found.append("the per-phase table does not start on the first screen")
    for figure in facts["figures"]:
        if figure["natural"] == 0:
            found.append(f"figure {figure['alt']} did not load")
        elif figure["width"] > width:  # #59 item 4: scrolling inside its box hid legends and points off-screen
            found.append(f"figure {figure['alt']} is {figure['width']:.0f} px wide on a {width} px screen")
        elif figure["width"] < MIN_SCALE * figure["natural"]:  # its 7-9 pt text shrunk below reading size
            found.append(f"figure {figure['alt']} is shrunk to {figure['width']:.0f} of {figure['natural']} px")
    return found
