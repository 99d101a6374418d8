"""docs/reproduction.md agrees with docs/reproduce/RESULTS.md (issue #47): every verdict heading,
bullet and table row pasted into its results section is a line of RESULTS.md, and every
"mean ± sd" of the summary table is one RESULTS.md states."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool():
    spec = importlib.util.spec_from_file_location("reproduction_docs", ROOT / "experiments" / "reproduction_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_pasted_result_is_a_line_of_results_md():
    tool = _tool()
    stale = tool.mismatches(tool.DOCS.read_text(), tool.RESULTS.read_text())
    assert not stale, "run `python experiments/reproduction_docs.py --write`:\n" + "\n".join(stale)


def test_the_summary_tables_spreads_are_results_md_numbers():
    tool = _tool()
    summary = tool.DOCS.read_text().split(tool.END, 1)[1].split("\n## ", 1)[0]  # that section only
    spreads = re.findall(r"\d+\.\d ± \d+\.\d", summary)
    assert spreads  # the table states some
    results = tool.RESULTS.read_text()
    assert [s for s in spreads if s not in results] == []


def test_the_sync_replaces_a_stale_line_by_the_one_of_its_section_and_key():
    tool = _tool()
    results = "## Amendment X\n\n### claim: **reproduced**\n\n* `a`: reproduced — gap 9.0\n  | 1 | 8.0 |\n"
    docs = (
        f"{tool.START}\n\n#### claim: **inconclusive**\n\n* `a`: inconclusive — gap 7.0\n  | 1 | 6.0 |\n\n{tool.END}\n"
    )
    assert len(tool.mismatches(docs, results)) == 3
    fixed, left = tool.synced(docs, results)
    assert not left and tool.mismatches(fixed, results) == []
    assert "#### claim: **reproduced**" in fixed and "* `a`: reproduced — gap 9.0" in fixed and "  | 1 | 8.0 |" in fixed
