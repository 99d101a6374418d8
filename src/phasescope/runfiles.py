"""Run-directory file helpers shared by training and sweeps."""

from __future__ import annotations

import os
from pathlib import Path


def atomic_write_text(path: Path, text: str) -> None:
    """Write to a temp file beside ``path``, then rename: readers never see half a file."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def differing_keys(saved: dict, current: dict, ignore: tuple[str, ...] = ()) -> list[str]:
    """Top-level keys whose values differ between a saved JSON config and the current one."""
    return sorted(k for k in set(saved) | set(current) if saved.get(k) != current.get(k) and k not in ignore)
