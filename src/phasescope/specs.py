"""What a sweep is, as typed values (no torch): the model to load, the probe to build, the
geometry overrides, the offsets and samples, and how to run it.

``SweepSpec`` is the sweep; ``to_argv()`` is the one place the command that reproduces it is
built, ``to_json()`` what spec.json records. ``RunOptions`` says how to run it (where, in
which batches) without changing what is measured. ``Geometry.resolve`` is the one place the
step, window, align and raw window are decided from what the model declares and what the user
asks, and where conflicts are refused::

    model declares (config.json, phasescope.json, --compress)   user asks (--step, --window, ...)
                          \\                                       /
                           Geometry.resolve  ->  step s, window w, align a, raw window L, source
"""

from __future__ import annotations

import numbers
import os
import shlex
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from phasescope.designs import DESIGNS  # noqa: F401  (re-exported: where sweeps read the design names)
from phasescope.errors import InputError

SCHEMA = 2  # spec.json's layout; run directories of schema 1 (no "schema" key) still resume
MAX_OFFSETS = 1_000_000  # offsets a sweep may list: each is a prompt per content
MAX_SAMPLES = 100_000  # contents per sweep; more would take days to check and score, and hung silently


def parse_offsets(text: str) -> list[int]:
    """'0:24' (start:stop, stop excluded) or '0,1,5': the command line's forms, which Python takes too."""
    bounds = None
    try:
        if ":" in text:
            bounds = tuple(int(x) for x in text.split(":"))
            start, stop = bounds
        else:
            values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        bounds, values = None, []
    if bounds is not None:
        if stop - start > MAX_OFFSETS:
            raise InputError(
                f"offsets {text!r} list {stop - start:,} offsets; at most {MAX_OFFSETS:,} (every offset is a prompt "
                "per content): sweep a range that shows the period, e.g. 0:48, or a sparser list"
            )
        if start >= stop:
            raise InputError(
                f"offsets {text!r}: start:stop counts up from start to stop (stop excluded), and {stop} is not above "
                f"{start}; e.g. {min(start, stop)}:{max(start, stop) or 24}"
            )
        values = list(range(start, stop))
    if values and min(values) < 0:
        raise InputError(
            f"offsets {text!r}: an offset is how far the needle is moved, 0 or more ({min(values)} is negative); "
            "e.g. 0:24"
        )
    if not values:
        raise InputError(f"offsets {text!r}: use start:stop (e.g. 0:24) or a list (e.g. 0,1,2,3)")
    return values


def _whole(name: str, value, example: str) -> None:
    """An integer argument given from Python as something else (a bool, a float, text) is refused by name."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name} must be an integer (e.g. {example}), got {value!r} ({type(value).__name__})")


@dataclass(frozen=True)
class ProbeSpec:
    """Which probe, and its own options: an instance of the probe module's ``Options``
    (probes/options.py; None: its defaults, filled in when the probe is resolved). What the
    options are is the probe's business: this class only carries them into the command and
    spec.json."""

    name: str = "kv-retrieval"  # a registered probe, or prompts:FILE.jsonl
    options: object | None = None

    @property
    def kind(self) -> str:
        """The registry name: ``prompts:FILE`` is the ``prompts`` probe."""
        return self.name.split(":", 1)[0] if ":" in self.name else self.name

    @property
    def argument(self) -> str | None:
        """What follows ``kind:`` (a file), or None."""
        return self.name.split(":", 1)[1] if ":" in self.name else None

    def get(self, option: str, default=None):
        """An option's value when this probe has it (``chat_template``), else ``default``."""
        return getattr(self.options, option, default)

    def argv(self) -> list[str]:
        return ["--probe", self.name] + (self.options.argv() if self.options is not None else [])

    def to_json(self) -> dict:
        return {"name": self.name} | (self.options.to_json() if self.options is not None else {})


@dataclass(frozen=True)
class GeometryOverrides:
    """What the user says about the compression geometry (None: what the model declares)."""

    step: int | None = None
    align: int | None = None
    window: int | None = None
    local: int | None = None

    def argv(self) -> list[str]:
        return [arg for name in ("step", "align", "window", "local") for arg in _flag(name, getattr(self, name))]


@dataclass(frozen=True)
class Remedies:
    """Test-time remedies applied to the model before scoring."""

    phase_ensemble: bool = False
    ensemble_pad_id: int | None = None

    def __post_init__(self) -> None:
        if self.ensemble_pad_id is not None and not self.phase_ensemble:
            raise InputError("--ensemble-pad-id is the phase ensemble's pad token: add --phase-ensemble, or drop it")

    def argv(self) -> list[str]:
        args = ["--phase-ensemble"] if self.phase_ensemble else []
        return args + _flag("ensemble_pad_id", self.ensemble_pad_id)


@dataclass(frozen=True)
class SweepSpec:
    """One sweep: everything that decides what is measured."""

    model: str
    probe: ProbeSpec = field(default_factory=ProbeSpec)
    geometry: GeometryOverrides = field(default_factory=GeometryOverrides)
    offsets: tuple[int, ...] | None = None  # None: default_offsets(step), once the model's step is known
    samples: int | None = None
    seed: int = 0
    remedies: Remedies = field(default_factory=Remedies)
    backend: object | None = None  # the model's backend's Options (backends/options.py); None: its defaults

    def __post_init__(self) -> None:
        if isinstance(self.offsets, str):  # the command line's form, from Python
            object.__setattr__(self, "offsets", parse_offsets(self.offsets))
        if self.offsets is not None:  # a list or range from Python: one comparable value
            try:
                object.__setattr__(self, "offsets", tuple(self.offsets))
            except TypeError:
                raise InputError(
                    f"offsets must be a list of integers or text like '0:24', got {self.offsets!r}"
                ) from None
            for d in self.offsets:
                _whole("offsets", d, "offsets=range(24) or offsets='0:24'")
            object.__setattr__(self, "offsets", tuple(int(d) for d in self.offsets))
            if not self.offsets or min(self.offsets) < 0:
                raise InputError(f"offsets must be a non-empty list of integers >= 0; got {list(self.offsets)}")
        if self.samples is not None:
            _whole("samples", self.samples, "samples=50")
            object.__setattr__(self, "samples", int(self.samples))  # numpy's integers are not JSON
        _whole("seed", self.seed, "seed=0")
        object.__setattr__(self, "seed", int(self.seed))
        if self.samples is not None and not 1 <= self.samples <= MAX_SAMPLES:
            raise InputError(
                f"--samples {self.samples} is invalid; allowed: 1 to {MAX_SAMPLES:,} contents (each is scored at every "
                "offset; split a larger study into several runs)"
            )
        if self.seed < 0:
            raise InputError(f"--seed {self.seed} is invalid; allowed: an integer >= 0")

    def with_offsets_for(self, step: int) -> SweepSpec:
        """This sweep with its offsets fixed: the default ones for ``step`` when none were given."""
        return self if self.offsets is not None else replace(self, offsets=default_offsets(step))

    def to_argv(self, run: RunOptions | None = None) -> list[str]:
        """The `phasescope sweep` arguments that reproduce this sweep (and ``run``'s options)."""
        offsets = [] if self.offsets is None else ["--offsets", offsets_text(self.offsets)]
        args = ["--model", self.model, *self.probe.argv(), *offsets]
        args += ["--seed", str(self.seed), *_flag("samples", self.samples), *self.geometry.argv()]
        args += (self.backend.argv() if self.backend is not None else []) + self.remedies.argv()
        return args + (run.argv() if run is not None else [])

    def command(self, run: RunOptions | None = None) -> str:
        return "phasescope sweep " + " ".join(shlex.quote(a) for a in self.to_argv(run))

    def to_json(self) -> dict:
        """The sweep as plain JSON (recorded in spec.json under "sweep"); the probe's and the
        backend's sections hold their own options only (the backend's: those that change what is
        measured, not a device or a timeout)."""
        backend = self.backend.to_json() if self.backend is not None else {}
        return {
            "model": self.model,
            "probe": self.probe.to_json(),
            "geometry": asdict(self.geometry),
            "offsets": None if self.offsets is None else list(self.offsets),
            "samples": self.samples,
            "seed": self.seed,
            "remedies": asdict(self.remedies),
            "backend": backend,
        }


IDENTITY_KEYS = ("samples", "step", "align", "window", "local", "batch_size")  # spec.json's, beside "sweep"


@dataclass(frozen=True)
class SweepIdentity:
    """What decides whether a run directory's records are this sweep's (``RunDir.open_for_sweep``):
    the typed sweep at its measured options, without the path its model was reached by (the
    weights fingerprint decides which model), the contents it scores, the geometry its phases are
    counted with, and the batch size (which prompts share a forward pass). spec.json's top-level
    ``probe`` (``Probe.spec``) only describes the probe; the prompts themselves are checked by the
    records' digests."""

    sweep: SweepSpec
    samples: int
    step: int
    align: int
    window: int
    local: int | None
    batch_size: int

    @classmethod
    def of(cls, spec: SweepSpec, samples: int, geometry: Geometry, batch_size: int) -> SweepIdentity:
        options = spec.probe.options
        probe = replace(spec.probe, options=options.measured()) if options is not None else spec.probe
        backend = spec.backend.measured() if spec.backend is not None else None
        sweep = replace(spec, model="", probe=probe, backend=backend)
        return cls(sweep, samples, geometry.step, geometry.align, geometry.window, geometry.local, batch_size)

    @classmethod
    def from_json(cls, data: dict, probe_options: type, backend_options: type) -> SweepIdentity:
        """``to_json``'s layout read back with the probe's and the backend's ``Options`` (an option
        they do not declare, or a value they refuse, raises: the identities cannot be equal)."""
        sweep = data["sweep"]
        probe = dict(sweep["probe"])
        name = probe.pop("name")
        spec = SweepSpec(
            "",
            ProbeSpec(name, probe_options(**probe)),
            GeometryOverrides(**sweep["geometry"]),
            offsets=sweep["offsets"],
            samples=sweep["samples"],
            seed=sweep["seed"],
            remedies=Remedies(**sweep["remedies"]),
            backend=backend_options(**sweep["backend"]),
        )
        return cls(spec, *(data[k] for k in IDENTITY_KEYS))

    def to_json(self) -> dict:
        sweep = self.sweep.to_json()
        del sweep["model"]
        return {"sweep": sweep} | {k: getattr(self, k) for k in IDENTITY_KEYS}


@dataclass(frozen=True)
class RunOptions:
    """How a sweep runs; none of it changes a number (a resumed run equals an uninterrupted one)."""

    out: Path | None = None
    batch_size: int | None = None
    progress: bool = False
    dry_run: bool = False
    prefix_reuse: bool = True
    adopt_records: bool = False  # a --out whose manifest.json was lost: vouch that its records come from this model
    resume: bool = False  # a rerun always resumes; with resume, an --out holding no sweep is an error
    log_samples: bool = False  # write RUN/samples.jsonl: each scored record's prompt ids and text, its candidates
    # (I, N): score the I-th of N parts of the sweep (contents I, I + N, ...; phasescope merge joins the parts)
    shard: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.shard is not None:
            object.__setattr__(self, "shard", parse_shard(self.shard))
        if self.out is not None and not isinstance(self.out, (str, os.PathLike)):
            raise InputError(f"out must be a directory path (a str or pathlib.Path), got {self.out!r}")
        # checked on the text: Path("") is ".", the current directory, where records must never land by accident
        if self.out is not None and str(self.out).strip() in ("", "."):
            raise InputError(
                f"--out {str(self.out)!r} is not a run directory; pass the directory to write, e.g. --out runs/sweep"
            )
        if self.out is not None and not isinstance(self.out, Path):
            object.__setattr__(self, "out", Path(self.out))
        if self.batch_size is not None and self.batch_size < 1:
            raise InputError(f"--batch-size {self.batch_size} is invalid; allowed: >= 1")

    def argv(self) -> list[str]:
        args = ["--out", str(self.out)] if self.out is not None else []
        args += _flag("batch_size", self.batch_size) + ([] if self.prefix_reuse else ["--no-prefix-reuse"])
        args += ["--shard", f"{self.shard[0]}/{self.shard[1]}"] if self.shard else []
        return args + (["--log-samples"] if self.log_samples else [])


def parse_shard(value) -> tuple[int, int]:
    """'2/8' or (2, 8) -> (2, 8): the third of eight parts (parts count from 0, as Slurm's array ids)."""
    text = f"{value[0]}/{value[1]}" if isinstance(value, (tuple, list)) and len(value) == 2 else str(value)
    index, _, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise InputError(f"--shard {text!r}: use I/N, the I-th of N parts counted from 0 (e.g. 0/4 ... 3/4)") from None
    if not (n >= 1 and 0 <= i < n):
        raise InputError(f"--shard {text!r}: the part I must be 0 .. N-1 and N at least 1 (e.g. 0/4 ... 3/4)")
    return i, n


SERVED = "a server"  # ModelGeometry.source of a served model: its compression is the server's, unknown here


@dataclass(frozen=True)
class ModelGeometry:
    """What a loaded model declares about its compression (all None: not compressed)."""

    step: int | None = None
    window: int | None = None
    align: int = 0
    local: int | None = None
    source: str = ""  # where it came from: "config.json", "phasescope.json", "--compress", ...


@dataclass(frozen=True)
class Geometry:
    """The geometry a sweep counts phases with: phase = (position - align) mod step."""

    step: int
    window: int
    align: int
    local: int | None
    source: str  # e.g. "from config.json", "from --compress", "labels only: the model is not compressed"

    @classmethod
    def resolve(cls, model: ModelGeometry, asked: GeometryOverrides, name: str = "the model") -> Geometry:
        """The model's own geometry with the user's additions; a value that contradicts what the
        model declares is refused (phases counted mod another step would be silently wrong)."""
        if model.step is None:
            return cls._labels_only(asked, model, name)
        for key in ("step", "window", "align"):
            mine, theirs = getattr(asked, key), getattr(model, key)
            if mine is not None and theirs is not None and mine != theirs:
                raise InputError(
                    f"--{key} {mine} contradicts {name}, whose {key} is {theirs} ({model.source}): phases would be "
                    f"counted with the wrong geometry; drop --{key}, or change the model's compression"
                    + (" (--compress)" if model.source == "--compress" else "")
                )
        if asked.local is not None and model.local is not None and asked.local < model.local:
            raise InputError(
                f"--local {asked.local} is smaller than {name}'s raw window L = {model.local} ({model.source}): a "
                "needle could sit in the raw window, where compression does not act; drop --local, or pass one >= "
                f"{model.local} to keep the needle further away"
            )
        window = asked.window or model.window or model.step
        local = asked.local if asked.local is not None else model.local
        source = f"from {model.source}" + ("; L from --local" if asked.local not in (None, model.local) else "")
        return cls(model.step, window, model.align, local, source)._checked()

    @classmethod
    def _labels_only(cls, asked: GeometryOverrides, model: ModelGeometry, name: str) -> Geometry:
        if asked.step is None:
            raise InputError(
                f"{name} declares no compression geometry; pass the step to label phases with (--step 4 for "
                "DeepSeek-V4, and --window / --local if they differ from the step / are known)"
            )
        window = asked.window or asked.step
        local = asked.local if asked.local is not None else model.local
        source = (
            "labels only: a served model does not say how it compresses its cache, phases are counted mod --step"
            if model.source == SERVED
            else "labels only: the model is not compressed, phases are counted mod --step"
        )
        return cls(asked.step, window, asked.align or 0, local, source)._checked()

    def _checked(self) -> Geometry:
        if self.step < 1:
            raise InputError(f"step={self.step} is invalid; allowed: >= 1")
        if not 0 <= self.align < self.step:
            raise InputError(f"align={self.align} is invalid; allowed: 0 <= align < step ({self.step})")
        if self.window < self.step:
            raise InputError(f"window={self.window} is invalid; allowed: >= step ({self.step})")
        if self.local is not None and self.local < 0:
            raise InputError(f"local={self.local} is invalid; allowed: the raw window in tokens, >= 0")
        return self

    def describe(self) -> str:
        raw = "unknown" if self.local is None else str(self.local)
        geometry = f"step s = {self.step}, window w = {self.window}, align {self.align}, raw window L = {raw}"
        return f"{geometry} ({self.source})"


COMPRESS_KEYS = {"s": "step", "w": "window", "L": "local", "a": "align", "visibility": "visibility"}


def compress_fields(text: str) -> dict | None:
    """``none`` or ``mean:s=4,w=4,L=128`` (keys s, w, L, a, visibility) -> the scheme's fields
    (None: none); the scheme itself is built and checked by ``kv.posthoc.parse_compress``."""
    if text == "none":
        return None
    pooler, _, rest = text.partition(":")
    if pooler != "mean":
        raise InputError(
            f"--compress {text!r}: post-hoc compression pools with 'mean' (the only pooler without trained "
            "weights), e.g. mean:s=4,w=4,L=128; or none"
        )
    fields: dict = {}
    for part in filter(None, rest.split(",")):
        key, eq, value = part.partition("=")
        if not eq or key not in COMPRESS_KEYS:
            raise InputError(f"--compress {text!r}: {part!r} is not KEY=VALUE with KEY in {sorted(COMPRESS_KEYS)}")
        if COMPRESS_KEYS[key] in fields:
            raise InputError(f"--compress {text!r}: {key} is given twice; give each key once, e.g. mean:s=4,w=4,L=128")
        try:
            fields[COMPRESS_KEYS[key]] = value if key == "visibility" else int(value)
        except ValueError:
            raise InputError(f"--compress {text!r}: {value!r} is not an integer") from None
    if "step" not in fields:
        raise InputError(f"--compress {text!r}: the step s is required, e.g. mean:s=4,w=4,L=128")
    fields.setdefault("window", fields["step"])  # w defaults to s (non-overlapping windows), as in the study
    return fields


WINDOWS_FOR_PERIOD = 6  # windows of the step the default offsets cover: the period test's candidates need them
MIN_DEFAULT_OFFSETS = 24


def default_offsets(step: int) -> tuple[int, ...]:
    """Offsets 0 .. max(24, 6 step) - 1: six windows of the step at least, so the gap and the
    period test can separate the phases from a drift (0:24 at step 4, 0:48 at step 8)."""
    return tuple(range(max(MIN_DEFAULT_OFFSETS, WINDOWS_FOR_PERIOD * step)))


def offsets_text(offsets) -> str:
    """'0:24' for a consecutive run, else a comma list (what --offsets reads back)."""
    values = list(offsets)
    if values == list(range(values[0], values[-1] + 1)) and len(values) > 1:
        return f"{values[0]}:{values[-1] + 1}"
    return ",".join(map(str, values))


def _flag(name: str, value) -> list[str]:
    return [] if value is None else ["--" + name.replace("_", "-"), str(value)]
