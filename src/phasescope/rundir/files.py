"""Run-directory file helpers shared by training, sweeps and reports: atomic writes, and JSON
reads whose errors name the file and say what to do."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from phasescope.errors import CheckpointError, InputError


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers never see half a file and nothing is written
    through a link: a temp file is *created* beside ``path`` (a new, unique name, O_EXCL: a
    planted ``PATH.tmp`` link is never opened), then renamed over it. A ``path`` that is itself
    a symbolic link is refused (a run directory from someone else could point it anywhere). On
    an error (a full disk, an interruption) the temp file is removed."""
    path = Path(path)
    refuse_link(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as err:  # a full disk: no half-written temp file is left, and the error names the file
        Path(tmp).unlink(missing_ok=True)
        raise OSError(err.errno, err.strerror or str(err), str(path)) from None
    except BaseException:  # Ctrl-C: no half-written temp file is left behind
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """``atomic_write_bytes`` of UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"))


def append_text(path: Path, text: str) -> None:
    """``text`` appended to ``path`` in one write; a failure names the file (a full disk raises
    ENOSPC from the write, which carries no file name)."""
    try:
        with path.open("a") as f:
            f.write(text)
    except OSError as err:
        if err.filename is None:
            raise OSError(err.errno, err.strerror or str(err), str(path)) from err
        raise


def refuse_link(path: Path) -> None:
    """InputError when ``path`` is a symbolic link: phasescope never writes through one."""
    if Path(path).is_symlink():
        target = os.readlink(path)
        raise InputError(
            f"{path} is a symbolic link (to {target}); phasescope does not write through links, so a run directory "
            "cannot redirect a write elsewhere: replace the link with the file itself, or use another directory"
        )


def write_section(out: str | Path, name: str, data) -> Path:
    """A section file (ablation.json, preferences.json, theory.json) in ``out``, created if needed:
    written atomically, with no NaN or Infinity (a statistic without data is null)."""
    path = Path(out) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data, indent=1, allow_nan=False))
    return path


class DuplicateKey(ValueError):
    """A JSON object names one key twice (json keeps the last silently: which one was meant?)."""


def unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """``json.loads``' object_pairs_hook that refuses a key given twice."""
    data = dict(pairs)
    if len(data) != len(pairs):
        seen: set[str] = set()
        twice = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise DuplicateKey(f"the key {twice!r} appears twice in one object")
    return data


def read_json(path: Path, what: str, fix: str = "") -> dict:
    """The JSON object in ``path`` (``what`` it is, for the message; ``fix`` how to repair it)."""
    data = read_json_value(path, what, fix)
    if not isinstance(data, dict):
        hint = f"; {fix}" if fix else ""
        raise InputError(f"{path}: the {what} must be a JSON object, not {type(data).__name__}{hint}")
    return data


def read_json_value(path: Path, what: str, fix: str = ""):
    """Any JSON value in ``path`` (an object, a list ...), with the errors of ``read_json``."""
    hint = f"; {fix}" if fix else ""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        raise InputError(f"{path}: the {what} is missing{hint}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"{path}: cannot read the {what} ({err}){hint}") from None
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)
    except (json.JSONDecodeError, DuplicateKey) as err:
        raise InputError(f"{path}: the {what} is not valid JSON ({err}){hint}") from None
    except RecursionError:
        raise InputError(f"{path}: the {what} is not valid JSON (nested too deeply){hint}") from None
    return data


def differing_keys(saved: dict, current: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """The keys whose values differ between a saved JSON config and the current one; inside a
    section present in both, the differing keys below it (``sweep.backend.compress``), so the
    message names the setting that changed."""
    out = []
    for key in sorted(set(saved) | set(current)):
        old, new = saved.get(key), current.get(key)
        if key in ignore or old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            out += [f"{key}.{inner}" for inner in differing_keys(old, new)]
        else:
            out.append(key)
    return out


def differences(saved: dict, current: dict, keys: list[str], limit: int = 4) -> str:
    """ "batch_size: 16 in the run, 3 now; ..." for the dotted ``keys`` of ``differing_keys``."""

    def value(data: dict, dotted: str):
        for part in dotted.split("."):
            data = data.get(part) if isinstance(data, dict) else None
        return json.dumps(data)

    shown = [f"{key}: {value(saved, key)} in the run, {value(current, key)} now" for key in keys[:limit]]
    return "; ".join(shown) + (f"; and {len(keys) - limit} more" if len(keys) > limit else "")


def latest_checkpoint(out: Path) -> Path | None:
    """The newest complete checkpoint of a training run (``checkpoints/LATEST`` names it), or None."""
    marker = out / "checkpoints" / "LATEST"
    if not marker.exists():
        return None
    name = marker.read_text().strip()
    path = out / "checkpoints" / name
    if not re.fullmatch(r"step-\d+", name) or not path.is_dir():
        intact = sorted(
            (p.name for p in (out / "checkpoints").iterdir() if p.is_dir() and re.fullmatch(r"step-\d+", p.name)),
            key=lambda n: int(n.split("-")[1]),
        )
        fix = (
            f"write the newest intact checkpoint's name ({intact[-1]}) into it to resume from there"
            if intact
            else f"delete {marker}: no checkpoint is left, so training starts again at step 0"
        )
        raise CheckpointError(
            f"{marker} names {repr(name) if name else 'nothing'}, which is not a checkpoint here; {fix}"
        )
    return path
