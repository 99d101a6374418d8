"""``metrics.json`` as typed values: ``Metrics`` (what `phasescope analyze` computes from a run's
records), its rows per phase (``PhaseRow``), its ``Verdict``, ``Period`` and ``LogScore``.

The statistics build the JSON (``analysis.stats.analyze_records``); everything that reads a
run's metrics -- the terminal table, figures, report.html, compare, export, reproduce -- reads
this object, so a misspelt statistic is an AttributeError at once rather than a silent ``None``.
The period test (``Period``) and the margin statistics (``LogScore``, ``MarginRow``) are typed
too; the descriptive sections (``trend``, ``windows``, ``phase_dependence``,
``candidate_probabilities``, ``task_metrics``) stay JSON objects, described by the module that
computes each (``analysis/windows.py``, ...).
``to_json`` gives back exactly the JSON read, so digests and files do not change.
"""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields, is_dataclass
from pathlib import Path

from phasescope.errors import InputError
from phasescope.rundir.files import read_json


@dataclass(frozen=True)
class PhaseRow:
    """Accuracy at one phase: raw with its content-clustered interval, and the drift-adjusted effect."""

    phase: int
    n: int  # records
    n_contents: int
    accuracy: float | None
    ci_low: float | None
    ci_high: float | None
    mean_logprob: float | None  # mean log p of the right answer
    mean_margin: float | None  # mean log p(right) - max log p(other candidates)
    adjusted_accuracy: float | None  # overall accuracy + the phase's drift-adjusted effect
    effect_pp: float | None  # drift-adjusted effect, percentage points
    effect_ci_pp: list[float] | None


@dataclass(frozen=True)
class Verdict:
    """The one plain reading of the statistics (``analysis/verdict.py``)."""

    kind: str | None  # "phase effect", "no detectable effect", "other period", "withheld", "ceiling", ...
    sentence: str | None
    outcome: str  # "accuracy" or the log-prob "margin"
    unit: str  # "pp" (accuracy) or "nats" (margin)
    effect: float | None  # the gap, in ``unit``
    effect_ci: list[float] | None
    p_value: float | None
    worst_phase: int | None
    best_phase: int | None
    phase_basis: str | None  # which scale worst/best were read on ("drift-adjusted" or "raw")
    period: int | None  # the detected period, if any
    boundary_phase: int  # step - 1: the last token of a compression window
    raw_note: str | None  # raw accuracy is lowest elsewhere: both numbers
    claims: list[str] = field(default_factory=list)  # what the verdict claims: "gap", "period", "dependence"
    adjusted_p: dict[str, float] = field(default_factory=dict)  # Holm-adjusted p of each test the verdict reads
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Period:
    """The period test over offsets (``analysis/period.py``)."""

    detected: int | None  # the detected period (None: none, or not tested)
    p_value: float | None  # None: not tested (``note`` says why)
    kind: str | None  # "step": the step or a divisor of it; "multiple": a multiple of the step; "other": another
    explained: dict[str, float]  # candidate period -> share of the drift-free variance its residues explain
    trend_degree: int | None
    tested: list[int]
    untestable: dict[str, str]  # candidate period -> why it could not be tested
    note: str | None
    multiple_p: float | None = None  # kind "multiple" (a multiple of the step): its residues beyond the step's phases
    step_component_p: float | None = None  # kind "multiple": the step's own phases inside that model
    multiple_test_p: float | None = None  # the claim "a multiple of the step" over all multiples tried (Bonferroni)
    multiple_candidate: int | None = None
    multiples_tried: list[int] = field(default_factory=list)
    base_detected: int | None = None  # the period named apart from multiples of the step
    base_kind: str | None = None
    divisor_share_upper: float | None = None  # a divisor found best: bound of the step's pattern beyond it
    beyond_step_p: float | None = None  # another period found best: its residues beyond the step's phases
    multiple_note: str | None = None  # no multiple of the step could be tested: why
    explained_null: dict[str, float] = field(default_factory=dict)  # candidate -> 95% of its share on noise alone
    candidate_p: dict[str, float] = field(default_factory=dict)  # candidate -> p against the test's min-p null
    multiple_ps: dict[str, float] = field(default_factory=dict)  # multiple of the step -> p beyond the step (Bonf.)


@dataclass(frozen=True)
class MarginRow:
    """The log-prob margin at one phase: mean with its content-clustered interval, and the drift-adjusted effect."""

    phase: int
    n_contents: int
    mean: float | None  # nats
    ci: list[float] | None
    effect: float | None
    effect_ci: list[float] | None


@dataclass(frozen=True)
class LogScore:
    """The phase statistics on the log-prob margin (``analysis/log_score.py``), in nats."""

    outcome: str  # "margin", or "logprob" when the records name no other candidate
    unit: str
    n_records: int
    phases: list[MarginRow]
    gap: float | None
    gap_ci: list[float] | None
    gap_p_value: float | None
    homogeneity_p_value: float | None
    trend_degree: int | None
    period: Period
    note: str | None


# written only when they are set (analyze adds them; analyze_records' own output lacks them)
_SET_ONLY = (
    "task_metrics", "per_task", "per_band", "lengths", "records_note", "n_resamples", "records_sha256", "schema",
    "metrics_sha256",
)  # fmt: skip


@dataclass(frozen=True)
class Metrics:
    """A run's statistics (``phasescope.analyze``); see docs/design.md, 'Statistics'."""

    step: int
    n_records: int
    n_contents: int
    n_informative_contents: int | None  # contents whose answers vary over offsets
    offsets: list[int]
    overall_accuracy: float
    phases: list[PhaseRow]
    accuracy_interval: str  # how the per-phase intervals are computed
    model: str  # the statistical model, in words
    trend_degree: int | None
    trend: dict | None
    gap_pp: float | None  # drift-adjusted, bias-corrected gap between the best and worst phase
    gap_plugin_pp: float | None
    gap_ci_pp: list[float] | None
    gap_p_value: float | None
    homogeneity_p_value: float | None
    gap_raw_pp: float | None  # raw max - min accuracy over phases (drift not removed)
    inference_note: str | None
    period: Period
    accuracy_by_offset: list[float]
    phase_by_offset: list[int]
    windows: dict  # analysis/windows.py
    phase_dependence: dict  # analysis/dependence.py
    candidate_probabilities: dict  # analysis/candidates.py
    log_score: LogScore | None  # the same statistics on the log-prob margin (None: no log-prob recorded)
    verdict: Verdict
    task_metrics: dict | None = None  # analysis/task_metrics.py (lm-eval probes)
    per_task: dict | None = None  # analysis/per_task.py: each task's own verdict (runs of several tasks)
    per_band: dict | None = None  # analysis/per_task.py: each length band's own verdict (--context-tokens A,B,...)
    lengths: dict | None = None  # the prompt lengths tested: min, max, bands
    factors: dict | None = None  # analysis/factors.py: the needle's, the prompt end's and the distance's phase
    accuracy_ci_by_offset: list | None = None  # [D] [low, high] per offset, clustered by content
    phase_of: str = "needle"  # whose phase ``phases`` are: "needle", or "end" when the design holds the needle
    fixed_contents: dict | None = None  # contents wrong (right) at every record
    records_note: str | None = None  # a partial run or a cut last line
    n_resamples: int | None = None
    records_sha256: str | None = None
    schema: int | None = None
    metrics_sha256: str | None = None
    extra: dict = field(default_factory=dict)  # keys this version does not know, kept as they were

    @classmethod
    def from_json(cls, data: dict, where: str = "metrics") -> Metrics:
        if not isinstance(data, dict):
            raise InputError(f"{where}: metrics must be a JSON object, not {type(data).__name__}")
        known = _known(cls, data, where)
        known["phases"] = [_typed(PhaseRow, row, f"{where}: phases") for row in data["phases"]]
        known["verdict"] = _typed(Verdict, data["verdict"], f"{where}: verdict")
        known["period"] = _typed(Period, data["period"], f"{where}: period")
        if data["log_score"] is not None:
            score = _known(LogScore, data["log_score"], f"{where}: log_score")
            score["phases"] = [_typed(MarginRow, row, f"{where}: log_score phases") for row in score["phases"]]
            score["period"] = _typed(Period, score["period"], f"{where}: log_score period")
            known["log_score"] = LogScore(**score)
        return cls(**known, extra=_extra(cls, data))

    def to_json(self) -> dict:
        """The JSON object metrics.json holds (``from_json``'s input, key for key)."""
        data = _json(self)
        return {k: v for k, v in data.items() if k not in _SET_ONLY or v is not None}

    def phase_accuracy(self) -> dict[int, float]:
        """Raw accuracy per phase, for the phases that have records."""
        return {row.phase: row.accuracy for row in self.phases if row.accuracy is not None}


def phase_accuracy_file(path: Path) -> tuple[dict[int, float], int | None]:
    """Phase -> accuracy and the step (None: not given) from a metrics.json read on its own, as
    copied without its records (only ``phases`` with ``phase`` and ``accuracy`` is needed)."""
    data = read_json(path, "metrics")
    rows = data.get("phases") if isinstance(data, dict) else None
    fix = 'it needs "phases": [{"phase": 0, "accuracy": 0.6}, ...]; or pass a run directory with its records.jsonl'
    if not isinstance(rows, list) or not all(isinstance(r, dict) and isinstance(r.get("phase"), int) for r in rows):
        raise InputError(f"{path}: no per-phase accuracy to read; {fix}")
    accuracy = {r["phase"]: r["accuracy"] for r in rows if isinstance(r.get("accuracy"), (int, float))}
    step = data.get("step")
    return accuracy, step if isinstance(step, int) else None


def _typed(cls, data: dict, where: str):
    """``cls`` from the JSON object ``data`` (its unknown keys in ``extra`` where ``cls`` keeps them)."""
    known = _known(cls, data, where)
    return cls(**known, extra=_extra(cls, data)) if "extra" in {f.name for f in fields(cls)} else cls(**known)


def _json(value):
    """Plain JSON of typed values: dataclasses field by field, with their ``extra`` keys merged back."""
    if is_dataclass(value):
        data = {f.name: _json(getattr(value, f.name)) for f in fields(value) if f.name != "extra"}
        return data | getattr(value, "extra", {})
    if isinstance(value, list):
        return [_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    return value


def _names(cls) -> set[str]:
    return {f.name for f in fields(cls)} - {"extra"}


def _known(cls, data: dict, where: str) -> dict:
    """The fields of ``cls`` in ``data``; InputError naming any required one that is missing."""
    if not isinstance(data, dict):
        raise InputError(f"{where}: expected a JSON object, got {type(data).__name__}")
    required = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    missing = [name for name in required if name not in data]
    if missing:
        raise InputError(f"{where} lacks {missing}; recompute it with `phasescope analyze RUN`")
    return {k: v for k, v in data.items() if k in _names(cls)}


def _extra(cls, data: dict) -> dict:
    return {k: v for k, v in data.items() if k not in _names(cls)}
