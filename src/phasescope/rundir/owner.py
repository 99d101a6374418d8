"""One owner per directory: what a directory holds (a sweep, a model, a training run, a comparison, a
reproduction), told by the files its command writes, and the one check every command that writes a
directory makes before any work (docs/reliability.md, 'One owner per directory').

A command refuses an ``--out`` that is empty, the current directory or a filesystem root (its
files would land among the user's), a file, or a directory another command made: a model written
into a sweep's run could no longer be resumed as a sweep, a sweep written into a model's directory
would take the model's manifest for its own.
"""

from __future__ import annotations

import os
from pathlib import Path

from phasescope.errors import InputError
from phasescope.rundir import CHECK, COMPARE_PAGE, MODEL_FILES, PAIRED, RECORDS, SPEC

# kind -> (the files that mark it, what it is, the command that makes it)
KINDS: dict[str, tuple[tuple[str, ...], str, str]] = {
    "sweep": ((SPEC, RECORDS), "a sweep run", "phasescope sweep"),
    "training": (("log.jsonl", "checkpoints", "LATEST"), "a training run", "phasescope train"),
    "model": (MODEL_FILES, "a model", "phasescope train"),
    "comparison": ((COMPARE_PAGE, PAIRED), "a comparison", "phasescope compare"),
    "check": ((CHECK,), "a serving check", "phasescope check"),
    "reproduction": (("RESULTS.md", "results.csv"), "a reproduction", "phasescope reproduce"),
}


def kinds_of(path: Path) -> dict[str, list[str]]:
    """The kinds a directory holds, each with the marker files found (empty: none)."""
    found = {}
    for kind, (markers, _, _) in KINDS.items():
        present = [name for name in markers if (path / name).exists()]
        if present:
            found[kind] = present
    return found


def claim_out(out: str | Path | None, command: str, may_hold: tuple[str, ...] = ()) -> Path | None:
    """The ``--out`` directory of ``command``, checked before any work (None stays None: the
    command's default). ``may_hold``: the kinds the command may find there (its own, to resume or
    update, and the sweep runs that section writers add to)."""
    if out is None:
        return None
    text = str(out)
    fix = f"pass a directory of its own, e.g. --out runs/{command.split()[-1]}"
    if not text.strip():
        raise InputError(f"--out is empty: `{command}` writes a directory; {fix}")
    path = Path(text)
    if path.is_symlink() and not path.exists():
        raise InputError(
            f"--out {path} is a link to {os.readlink(path)}, which does not exist: `{command}` does not write through "
            f"links; {fix}"
        )
    resolved = path.resolve()
    if resolved == Path.cwd().resolve() or resolved == Path(resolved.anchor):
        where = "the current directory" if resolved == Path.cwd().resolve() else "the filesystem root"
        raise InputError(f"--out {text!r} is {where}: `{command}` would write its files among yours; {fix}")
    if path.exists() and not path.is_dir():
        raise InputError(f"--out {path} is a file, not a directory: `{command}` writes a directory there; {fix}")
    if path.is_dir():
        for kind, markers in kinds_of(path).items():
            if kind in may_hold:
                continue
            _, what, maker = KINDS[kind]
            raise InputError(
                f"--out {path} holds {what} ({', '.join(markers)}, made by `{maker}`): `{command}` would write "
                f"beside it and spoil it; {fix}"
            )
    return path
