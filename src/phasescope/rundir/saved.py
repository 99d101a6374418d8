"""spec.json read back as a type (issue #45): what a finished sweep did, parsed and checked once
(``RunDir.read_sweep``) for every reader -- analysis, reports, compare, export. Whether a run
*resumes* is decided where it is reopened, by the typed ``specs.SweepIdentity`` (``rundir.identity``)
and the records' prompt digests; this is what the readers need of it. A run without spec.json
(records adopted or made by hand) reads as an empty sweep: every field None, its probe unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from phasescope.errors import InputError


def _is_int(value) -> bool:
    """Not ``records.is_int``: that one also bounds |value| < 2^53 (positions), and a sweep's --seed
    may be larger."""
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class SavedContent:
    """A content as a probe describes it in spec.json (``probe.contents``: the code probe's and
    prompts' own): its candidates' answer texts by name and the padding unit."""

    candidates: dict[str, str]
    pad_unit: str | None = None


def _contents(probe: dict) -> tuple[SavedContent, ...]:
    """``probe.contents`` read once; () when the probe lists none or lists something else (a
    description by hand: nothing is taken from it)."""
    contents = probe.get("contents")
    if not isinstance(contents, list) or not all(isinstance(c, dict) for c in contents):
        return ()
    out = []
    for c in contents:
        candidates = c.get("candidates") if isinstance(c.get("candidates"), dict) else {}
        unit = c.get("pad_unit")
        texts = {str(name): text for name, text in candidates.items() if isinstance(text, str)}
        out.append(SavedContent(texts, unit if isinstance(unit, str) else None))
    return tuple(out)


def _sweep_sections(data: dict, where: str) -> dict:
    """The typed sweep's parts a reader shows: ``sweep.model`` and its owners' sections."""
    sweep = data.get("sweep", {})
    if not isinstance(sweep, dict):
        raise InputError(f"{where}: sweep must be an object, got {sweep!r}")
    sections = {"probe_options": "probe", "model_options": "backend", "remedies": "remedies"}
    out: dict = {name: sweep.get(key) or {} for name, key in sections.items()}
    for name, key in sections.items():
        if not isinstance(out[name], dict):
            raise InputError(f"{where}: sweep.{key} must be an object, got {out[name]!r}")
    source, spec = data.get("geometry_source"), sweep.get("model")
    return out | {
        "geometry_source": None if source is None else str(source),
        "model_spec": None if spec is None else str(spec),
    }


@dataclass(frozen=True)
class SavedSweep:
    path: str  # spec.json, for messages
    seed: int = 0  # the analysis' bootstrap seed (the sweep's)
    step: int | None = None
    window: int | None = None
    align: int | None = None
    local: int | None = None  # the raw window L (None: unknown)
    geometry_source: str | None = None  # where the geometry came from (schema 2)
    offsets: list[int] | None = None
    samples: int | None = None
    model: str | None = None  # the model as the backend described it (``phasescope model DIR``)
    model_spec: str | None = None  # the model as the sweep was given it (``sweep.model``; schema 2)
    probe: dict = field(default_factory=dict)  # the probe's description (``Probe.spec``)
    contents: tuple[SavedContent, ...] = ()  # the probe's contents, where it lists them (``probe.contents``)
    contents_by_sample: bool = True  # records number contents 0 .. samples - 1 (``Probe.contents_by_sample``)
    # the typed sweep's owner sections as saved (schema 2; {} before): the probe's name and options
    # (``sweep.probe``), the model options (``sweep.backend``), the remedies (``sweep.remedies``)
    probe_options: dict = field(default_factory=dict)
    model_options: dict = field(default_factory=dict)
    remedies: dict = field(default_factory=dict)
    raw: dict = field(default_factory=dict)  # every field as saved (reports show them all)

    @classmethod
    def from_json(cls, data: dict, path: str | Path) -> SavedSweep:
        from phasescope.rundir import check_schema

        where = str(path)
        if not data:
            return cls(where)
        check_schema(data, Path(where))
        seed = data.get("seed", 0)
        if not _is_int(seed):
            raise InputError(f"{where}: seed must be an integer, got {seed!r}")
        offsets = data.get("offsets")
        if offsets is not None and not (isinstance(offsets, list) and all(_is_int(d) for d in offsets)):
            raise InputError(f"{where}: offsets must be a list of integers, got {offsets!r}")
        ints = {k: data.get(k) for k in ("step", "window", "align", "local", "samples")}
        for name, value in ints.items():
            if value is not None and not _is_int(value):
                raise InputError(f"{where}: {name} must be an integer, got {value!r}")
        probe = data.get("probe")
        model = data.get("model")
        by_sample = data.get("contents_by_sample")
        if by_sample is None:  # spec.json before the probe said: only lm-eval numbered its contents otherwise
            by_sample = not (isinstance(probe, dict) and str(probe.get("probe", "")).startswith("lm-eval"))
        elif not isinstance(by_sample, bool):
            raise InputError(f"{where}: contents_by_sample must be true or false, got {by_sample!r}")
        return cls(
            where,
            seed,
            **ints,
            offsets=offsets,
            model=None if model is None else str(model),
            probe=probe if isinstance(probe, dict) else {},
            contents=_contents(probe) if isinstance(probe, dict) else (),
            contents_by_sample=by_sample,
            **_sweep_sections(data, where),
            raw=data,
        )

    @property
    def probe_name(self) -> str | None:
        name = self.probe.get("probe")
        return None if name is None else str(name)

    @property
    def design(self) -> str | None:
        return self.probe.get("design")

    @property
    def kv_gaps(self) -> list | None:
        gaps = self.probe.get("kv_gaps")
        return gaps if isinstance(gaps, list) else None

    @property
    def bands(self) -> list[int]:
        """The length bands (``--context-tokens A,B,...``), [] when the sweep had one length."""
        lengths = self.probe.get("context_tokens")
        return list(lengths) if isinstance(lengths, list) and len(lengths) > 1 else []
