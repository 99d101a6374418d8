"""Screenshots of the pages phasescope writes, as headless Chromium shows their first screen at
1280 px and 400 px: the demo's report.html (tiny-s4) and compare.html, a floor run, a ceiling run
and an lm-eval run. Writes docs/pages/<page>-<width>.png and docs/pages/pages.json (each page's
layout facts and the problems tests/browser.py finds: none expected).

Run: .venv/bin/python docs/pages/make_pages.py   (about 2 minutes; needs a Chromium: make chromium)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = Path(__file__).resolve().parent
WIDTHS = (1280, 400)
sys.path.insert(0, str(ROOT / "tests"))  # the suite's page checks and small runs

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # the lm-eval tasks read local JSON files
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def demo_pages(root: Path) -> dict[str, Path]:
    """The README's main job, run into ``root``: tiny-s4's report and the comparison."""
    demo = root / "demo"
    subprocess.run([sys.executable, "-m", "phasescope", "demo", "--out", str(demo)], check=True, cwd=ROOT)
    return {"demo-report": demo / "tiny-s4" / "report.html", "demo-compare": demo / "compare" / "compare.html"}


def lm_eval_page(root: Path) -> Path:
    """Two local lm-eval tasks (tests/data/lm_eval) on a tiny random Qwen3, swept and reported."""
    import phasescope
    from hf_models import eos_word_tokenizer, tiny_qwen3

    model = tiny_qwen3(root / "qwen3", eos_word_tokenizer())
    run = root / "lm-eval"
    os.chdir(ROOT)  # the tasks' YAML names its data relative to the repository root
    probe = "lm-eval:ps_capitals,ps_phrases"
    phasescope.sweep(f"hf:{model}", probe, step=4, offsets=range(12), include_path="tests/data/lm_eval", out=run)
    phasescope.analyze(run)
    return phasescope.report(run)


def main() -> None:
    from browser import chromium, chromium_path, look, problems
    from page_runs import sweep_pages

    path = chromium_path()
    if path is None:
        sys.exit("no Chromium here: `make chromium` installs Debian's (or set PHASESCOPE_CHROMIUM)")
    with tempfile.TemporaryDirectory(prefix="phasescope-pages-") as tmp:
        root = Path(tmp)
        pages = demo_pages(root)
        small = sweep_pages(root / "small")
        pages |= {"floor-report": small["floor"], "ceiling-report": small["ceiling"]}
        pages["lm-eval-report"] = lm_eval_page(root)
        facts = {}
        with chromium(path) as browser:
            for name, page in pages.items():
                for width in WIDTHS:
                    seen = look(browser, page, width, OUT / f"{name}-{width}.png")
                    facts[f"{name}-{width}"] = {"problems": problems(seen, width), **seen}
                    print(f"{name} at {width} px: {'; '.join(facts[f'{name}-{width}']['problems']) or 'no problems'}")
    (OUT / "pages.json").write_text(json.dumps(facts, indent=1) + "\n")


if __name__ == "__main__":
    main()
