"""phasescope: find and measure phase sensitivity in models with chunked KV-cache compression.

Importing the package is cheap; submodules (``phasescope.kv``, ``phasescope.model``) load torch
when used.
"""

from phasescope.version import __version__

__all__ = ["Metrics", "Record", "__version__", "analyze", "compare", "load_run", "paired", "report", "sweep"]


def __getattr__(name: str):
    """``phasescope.sweep`` loads torch when first used; ``analyze`` / ``report`` / ``compare`` /
    ``paired`` never do."""
    if name in ("sweep", "analyze", "report", "compare"):
        from phasescope import api

        return getattr(api, name)
    if name == "paired":  # two runs on identical items, record by record (phasescope.results; no torch)
        from phasescope.results import paired

        return paired
    if name == "load_run":  # the run's tables as pandas DataFrames (phasescope.export)
        from phasescope.export import load_run

        return load_run
    if name == "Metrics":  # what analyze returns (phasescope.rundir.metrics; no torch)
        from phasescope.rundir.metrics import Metrics

        return Metrics
    if name == "Record":  # one line of records.jsonl (phasescope.rundir.records; no torch)
        from phasescope.rundir.records import Record

        return Record
    raise AttributeError(f"module 'phasescope' has no attribute {name!r}")
