"""Shared checks for typed configs read from JSON or dicts."""

from __future__ import annotations

from dataclasses import fields

from phasescope.errors import InputError


def reject_unknown_keys(cls, data: dict, what: str) -> None:
    """ValueError naming unknown keys and the known ones (configs never ignore a key silently)."""
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise InputError(f"{what}: unknown keys {unknown}; known keys: {sorted(known)}")
