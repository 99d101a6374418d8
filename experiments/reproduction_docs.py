"""docs/reproduction.md's pasted results against docs/reproduce/RESULTS.md (issue #47).

    .venv/bin/python experiments/reproduction_docs.py [--write]

The "Results (this machine)" section of docs/reproduction.md pastes RESULTS.md's verdict
headings, bullets and tables (one heading level deeper) between its own readings. A *pasted
line* is a verdict heading (``#### name: **verdict**``), a bullet that starts with a recipe or a
seed, or a table row; each must be a line of RESULTS.md. Without ``--write`` this prints the
lines that are not; with it, each is replaced by RESULTS.md's line of the same section and the
same key (the heading's name, the bullet up to its first colon, the table row's first cell).
tests/test_reproduction_docs.py runs the check.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "reproduction.md"
RESULTS = ROOT / "docs" / "reproduce" / "RESULTS.md"
START, END = "## Results (this machine)", "## Our numbers next to the study's"
PASTED = re.compile(r"^(#{2,4} .*: \*\*.*\*\*$|\* `|\* \*\*T|  \* seed |\| [^-]|  \| [^-])")


def _heading(line: str) -> str | None:
    return line.lstrip("#").strip() if line.startswith("#") else None


def key(line: str) -> str:
    """What identifies a pasted line within its section: a heading's name, a bullet up to its first
    colon or bracket (or its first 40 characters), a table row's first cell."""
    if line.startswith("#"):
        return _heading(line).split(": **")[0]
    stripped = line.strip()
    if stripped.startswith("|"):
        return line.split("|")[0] + "|" + stripped.split("|")[1] + "|"
    cut = [i for i in (line.find(": "), line.find(" [")) if i > 0]
    return line[: min(cut)] if cut else line[:40]


def sections(lines: list[str]) -> list[tuple[str, str]]:
    """(where the line sits, line) for every line: the verdict heading's name, and for an indented
    line (a seed's bullet, a table under a recipe) the recipe bullet above it too."""
    out, heading, bullet = [], "", ""
    for line in lines:
        if line.startswith("#"):
            heading, bullet = key(line), ""
        elif line.startswith("* "):
            bullet = key(line)
        out.append((heading + (" / " + bullet if line.startswith("  ") else ""), line))
    return out


def docs_part(text: str) -> tuple[str, str, str]:
    head, rest = text.split(START, 1)
    body, tail = rest.split(END, 1)
    return head + START, body, END + tail


def mismatches(docs: str, results: str) -> list[str]:
    """Pasted lines of docs/reproduction.md's results section that RESULTS.md does not hold."""
    known = {line.lstrip("#").strip() for line in results.splitlines()}
    _, body, _ = docs_part(docs)
    return [line for line in body.splitlines() if PASTED.match(line) and line.lstrip("#").strip() not in known]


def synced(docs: str, results: str) -> tuple[str, list[str]]:
    """docs with each stale pasted line replaced by RESULTS.md's line of the same section and key;
    the lines with no such counterpart are returned unchanged, for a person to read."""
    candidates: dict[tuple[str, str], str] = {}
    anywhere: dict[str, list[str]] = {}  # a key RESULTS.md holds once matches under any heading (docs renames some)
    for section, line in sections(results.splitlines()):
        candidates.setdefault((section, key(line)), line)
        anywhere.setdefault(key(line), []).append(line)
    head, body, tail = docs_part(docs)
    stale = set(mismatches(docs, results))
    out, left = [], []
    for section, line in sections(body.split("\n")):
        if line not in stale:
            out.append(line)
            continue
        found = candidates.get((section, key(line)))
        if found is None and len(anywhere.get(key(line), [])) == 1:
            found = anywhere[key(line)][0]
        if found is None:
            left.append(line)
            out.append(line)
        else:
            level = len(line) - len(line.lstrip("#"))
            out.append("#" * level + " " + found.lstrip("#").strip() if level else found)
    return head + "\n".join(out) + tail, left


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace stale pasted lines in docs/reproduction.md")
    args = parser.parse_args()
    docs, results = DOCS.read_text(), RESULTS.read_text()
    if args.write:
        docs, left = synced(docs, results)
        DOCS.write_text(docs)
        for line in left:
            print(f"no counterpart in RESULTS.md: {line[:150]}")
    for line in mismatches(docs, results):
        print(f"not in RESULTS.md: {line[:150]}")


if __name__ == "__main__":
    main()
