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

import difflib
import shlex
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path

from phasescope.errors import InputError

SCHEMA = 2  # spec.json's layout; run directories of schema 1 (no "schema" key) still resume
DTYPES = ("float32", "bfloat16", "float16")
DESIGNS = ("shift-needle", "pad-prefix")
MAX_SAMPLES = 100_000  # contents per sweep; more would take days to check and score, and hung silently


@dataclass(frozen=True)
class BackendOptions:
    """How to load a model (sweep's model options); none of them changes what is measured except
    dtype and compress, which the run's fingerprint records."""

    dtype: str = "float32"
    device: str = "cpu"
    trust_remote_code: bool = False
    compress: str = "none"  # hf: post-hoc compression, e.g. mean:s=4,w=4,L=128 (phasescope.kv.posthoc)
    tokenizer: str | None = None  # a tokenizer directory, or deepseek-v4 / qwen3
    concurrency: int = 8  # openai: requests in flight
    timeout: float = 120.0  # openai: seconds per request
    retries: int = 4  # openai: retries after a 5xx answer, a dropped connection or unreadable JSON
    backoff: float = 1.0  # openai: seconds before the first retry, doubled each time
    api_key_env: str = "OPENAI_API_KEY"  # openai: environment variable holding the key (never stored)

    def __post_init__(self) -> None:
        compress_fields(self.compress)  # refuses a malformed scheme before anything loads
        if self.concurrency < 1 or self.retries < 0 or not self.timeout > 0 or self.backoff < 0:
            raise InputError("--concurrency >= 1, --retries >= 0, --timeout > 0 and backoff >= 0 are required")
        if self.dtype not in DTYPES:
            raise InputError(f"--dtype {self.dtype!r} is invalid; allowed: {' | '.join(DTYPES)}")

    def argv(self) -> list[str]:
        """The options that differ from the defaults, as command-line arguments."""
        default = BackendOptions()
        args = []
        for name, flag in (("dtype", "--dtype"), ("device", "--device"), ("compress", "--compress")):
            if getattr(self, name) != getattr(default, name):
                args += [flag, str(getattr(self, name))]
        args += ["--trust-remote-code"] if self.trust_remote_code else []
        args += ["--tokenizer", self.tokenizer] if self.tokenizer else []
        for name in ("concurrency", "timeout", "retries", "api_key_env"):
            if getattr(self, name) != getattr(default, name):
                args += ["--" + name.replace("_", "-"), str(getattr(self, name))]
        return args


@dataclass(frozen=True)
class ProbeSpec:
    """Which probe and how it renders its contents (every field is a `phasescope sweep` option)."""

    name: str = "kv-retrieval"  # a registered probe, or prompts:FILE.jsonl
    design: str = "shift-needle"
    depth: float = 0.5
    kv_gaps: tuple[int, ...] = (0,)
    context_tokens: int | None = None
    pair_format: str = "auto"
    filler: str | None = None
    chat_template: bool = False
    probe_file: str | None = None  # padding-completion: your own prompts
    include_path: str | None = None  # lm-eval: a directory of local task YAML files
    same_phase: bool = True  # text kv-retrieval: every content's anchor at the same phase at each offset

    def __post_init__(self) -> None:
        if self.design not in DESIGNS:
            raise InputError(f"--design {self.design!r} is invalid; allowed: {' | '.join(DESIGNS)}")
        if not 0 <= self.depth <= 1:
            raise InputError(f"--depth {self.depth!r} is invalid; allowed: a fraction in [0, 1] (0.5: the middle)")
        gaps = list(self.kv_gaps)
        if not gaps or any(not isinstance(g, int) or g < 0 for g in gaps) or len(set(gaps)) != len(gaps):
            raise InputError(f"--kv-gaps {self.kv_gaps!r} is invalid; allowed: distinct integers >= 0, e.g. 0,1")
        object.__setattr__(self, "kv_gaps", tuple(gaps))  # a list or range from Python: one comparable value
        for name in ("probe_file", "include_path"):  # a Path from Python: spec.json holds text
            if isinstance(getattr(self, name), Path):
                object.__setattr__(self, name, str(getattr(self, name)))

    @property
    def kind(self) -> str:
        """The registry name: ``prompts:FILE`` is the ``prompts`` probe."""
        return self.name.split(":", 1)[0] if ":" in self.name else self.name

    @property
    def argument(self) -> str | None:
        """What follows ``kind:`` (a file), or None."""
        return self.name.split(":", 1)[1] if ":" in self.name else None

    OFF_FLAGS = {"same_phase": "--mixed-phase"}  # a boolean option whose default is on: the flag that turns it off

    @classmethod
    def flag(cls, name: str, value) -> str:
        """The command-line flag that sets option ``name`` to ``value`` (``--mixed-phase``, ``--depth``)."""
        if value is False and name in cls.OFF_FLAGS:
            return cls.OFF_FLAGS[name]
        return "--" + name.replace("_", "-")

    def argv(self) -> list[str]:
        args = ["--probe", self.name, "--design", self.design, "--depth", str(self.depth)]
        args += ["--kv-gaps", ",".join(map(str, self.kv_gaps))] + _flag("context_tokens", self.context_tokens)
        args += ["--pair-format", self.pair_format] if self.pair_format != "auto" else []
        args += ["--filler", self.filler] if self.filler is not None else []
        args += ["--chat-template"] if self.chat_template else []
        args += ["--probe-file", self.probe_file] if self.probe_file else []
        args += ["--include-path", self.include_path] if self.include_path else []
        args += [] if self.same_phase else [self.flag("same_phase", False)]
        return args


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
    backend: BackendOptions = field(default_factory=BackendOptions)

    def __post_init__(self) -> None:
        if self.offsets is not None:  # a list or range from Python: one comparable value
            object.__setattr__(self, "offsets", tuple(self.offsets))
            if not self.offsets or min(self.offsets) < 0:
                raise InputError(f"offsets must be a non-empty list of integers >= 0; got {list(self.offsets)}")
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
        args += self.backend.argv() + self.remedies.argv()
        return args + (run.argv() if run is not None else [])

    def command(self, run: RunOptions | None = None) -> str:
        return "phasescope sweep " + " ".join(shlex.quote(a) for a in self.to_argv(run))

    def to_json(self) -> dict:
        """The sweep as plain JSON (recorded in spec.json under "sweep")."""
        data = asdict(self)
        data["offsets"] = None if self.offsets is None else list(self.offsets)
        data["probe"]["kv_gaps"] = list(self.probe.kv_gaps)
        data["backend"] = {k: v for k, v in data["backend"].items() if k in ("dtype", "compress", "tokenizer")}
        return data


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

    def __post_init__(self) -> None:
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
        return args + _flag("batch_size", self.batch_size) + ([] if self.prefix_reuse else ["--no-prefix-reuse"])


def sweep_settings(model: str, **options) -> tuple[SweepSpec, RunOptions]:
    """The typed sweep and how to run it from options named as `phasescope sweep`'s (``kv_gaps``,
    ``step``, ``batch_size``, ...; ``probe`` is the probe's name): the one mapping from option
    names to the specs, for the command line and ``phasescope.sweep`` alike. ``backend`` (a
    ``BackendOptions``) may stand for the model options. An unknown name is refused, with the
    closest known one."""
    sections: dict[str, dict] = {name: {} for name in ("sweep", "probe", "geometry", "remedies", "backend", "run")}
    base = options.pop("backend", None) or BackendOptions()
    for name, value in options.items():
        if name not in OPTION_SECTION:
            close = difflib.get_close_matches(name, OPTION_SECTION, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise InputError(
                f"{name!r} is not a sweep option; {hint}the options are {', '.join(sorted(OPTION_SECTION))}"
            )
        sections[OPTION_SECTION[name]]["name" if name == "probe" else name] = value
    spec = SweepSpec(
        model,
        ProbeSpec(**sections["probe"]),
        GeometryOverrides(**sections["geometry"]),
        remedies=Remedies(**sections["remedies"]),
        backend=replace(base, **sections["backend"]),
        **sections["sweep"],
    )
    return spec, RunOptions(**sections["run"])


def _option_sections() -> dict[str, str]:
    """option name -> the spec it belongs to (every field name is one option; ProbeSpec.name is --probe)."""
    table = {"offsets": "sweep", "samples": "sweep", "seed": "sweep", "probe": "probe"}
    for section, cls in (
        ("probe", ProbeSpec), ("geometry", GeometryOverrides), ("remedies", Remedies), ("backend", BackendOptions),
        ("run", RunOptions),
    ):  # fmt: skip
        table |= {f.name: section for f in fields(cls) if f.name != "name"}
    return table


OPTION_SECTION = _option_sections()


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
        source = "labels only: the model is not compressed, phases are counted mod --step"
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
