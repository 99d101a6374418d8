"""manifest.json of a sweep: the versions, the git sha, the seed and the weights fingerprint
(built only when a run directory has none: it makes a git call)."""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from phasescope.backends.base import Backend


def manifest(model: Backend, seed: int) -> dict:
    import torch

    from phasescope.version import __version__

    versions = {
        "phasescope": __version__,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }
    for package in ("transformers", "lm_eval"):
        try:
            versions[package] = importlib.metadata.version(package.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            pass
    try:
        sha = (
            subprocess.run(
                ["git", "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                timeout=5,
                cwd=Path(__file__).parent,
            ).stdout.strip()
            or None
        )
    except (OSError, subprocess.SubprocessError):
        sha = None
    about = getattr(model, "about", None)  # a served model: the server's name and version
    return ({"server": about()} if about is not None else {}) | {
        "created": datetime.now(UTC).isoformat(timespec="seconds"),  # when the sweep started
        "versions": versions,
        "git_sha": sha,
        "seed": seed,
        "model_fingerprint": model.info.fingerprint,
        "model": model.info.description,
    }
