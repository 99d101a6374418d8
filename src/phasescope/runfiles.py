"""Run-directory file helpers shared by training, sweeps and reports: atomic writes, and JSON
reads whose errors name the file and say what to do."""

from __future__ import annotations

import json
import os
from pathlib import Path

from phasescope.errors import InputError


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temp file beside ``path``, then rename: readers never see half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


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
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: the {what} is not valid JSON ({err}){hint}") from None
    return data


def differing_keys(saved: dict, current: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """Top-level keys whose values differ between a saved JSON config and the current one."""
    return sorted(k for k in set(saved) | set(current) if saved.get(k) != current.get(k) and k not in ignore)
