"""The run directory: the one owner of its file names, its lock, and how a sweep opens or
resumes it (the spec and the weights fingerprint must match; an older spec.json reads as this
version would have written it). Readers (``results``, ``reporting``, ``export``) reach the
files through ``RunDir``; writers go through ``rundir.files``' atomic writes. The package is the
run-directory layer: ``files`` (atomic writes, JSON reading, config diffs), ``records`` (the
record schema and the one reader of records.jsonl), ``metrics`` (metrics.json as typed values)
and, here, ``RunDir``.

    RUN/spec.json        what a resume must match (``run.orchestrator.spec_json``)
    RUN/manifest.json    versions, git sha, seed, the weights fingerprint, the command
    RUN/records.jsonl    one record per line, appended one batch at a time
    RUN/metrics.json     ``phasescope analyze``'s statistics (``rundir.metrics.Metrics``)
    RUN/report.html      ``phasescope report``
    RUN/.lock            held by the one process writing the run
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from phasescope.errors import InputError, ProbeError
from phasescope.rundir.files import append_text, atomic_write_text, read_json, refuse_link
from phasescope.rundir.identity import (  # noqa: F401  (re-exported: the old layouts' tables and the upgrade)
    LEGACY_BACKEND_KEYS,
    LEGACY_PROBE_DEFAULTS,
    RENAMED_VALUES,
    differences_from,
    upgrade_spec,
)
from phasescope.rundir.records import read_records
from phasescope.rundir.saved import SavedSweep
from phasescope.specs import SCHEMA, SweepIdentity

SPEC, MANIFEST, RECORDS, METRICS, REPORT, LOCK = (
    "spec.json", "manifest.json", "records.jsonl", "metrics.json", "report.html", ".lock"
)  # fmt: skip
SAMPLES = "samples.jsonl"  # --log-samples: the prompt (ids and text) and candidates each record was scored on
# a served model's answers that broke the protocol (a short generation, other prompt ids than sent, missing or
# non-finite log-probs): findings, one JSON object per item, never records (the gate counts them)
PROTOCOL = "protocol.jsonl"
FIGURES = "figures"  # report's and compare's figures (PNG)
# the sections other commands add to a run with --out RUN (report.html shows each)
ABLATION, PREFERENCES, THEORY = "ablation.json", "preferences.json", "theory.json"
PREFERENCES_FIGURE = "preferences.png"
COMPARE_PAGE, PAIRED = "compare.html", "paired.json"  # compare --out DIR (--paired: the record-by-record table)
LM_EVAL_RESULTS = "lm_eval_results.json"  # export --format lm-eval, by default
# the gate of compare --paired / check (phasescope.gate): pass or fail as JSON, JUnit XML and Markdown, and a
# reproducer per failing cell (its request body beside it)
GATE, JUNIT, SUMMARY_MD, REPRODUCERS = "gate.json", "junit.xml", "summary.md", "reproducers"
# phasescope check --out DIR: its summary, and its two sweeps and their comparison as directories
CHECK, CHECK_RUNS = "check.json", ("reference", "stack", "compare")
RUN_FILES = (LOCK, SPEC, MANIFEST, RECORDS, METRICS, REPORT, SAMPLES, PROTOCOL)
# what a model directory holds (phasescope's own, a training run's, transformers'): never a sweep's --out
MODEL_FILES = ("model.safetensors", "model_config.json", "train_config.json", "config.json")


def _by_record_key(path: Path) -> dict:
    """A JSON-lines file of one object per record key (content_id, offset, variant), the last line
    per key kept; {} without the file. A line cut by an interruption is skipped."""
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
            out[(entry["content_id"], entry["offset"], entry.get("variant", 0))] = entry
        except (json.JSONDecodeError, TypeError, KeyError):
            continue
    return out


@dataclass(frozen=True)
class RunDir:
    """A sweep's run directory: its files by name, and opening it for a sweep."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    @property
    def spec(self) -> Path:
        return self.path / SPEC

    @property
    def manifest(self) -> Path:
        return self.path / MANIFEST

    @property
    def records(self) -> Path:
        return self.path / RECORDS

    @property
    def metrics(self) -> Path:
        return self.path / METRICS

    @property
    def report(self) -> Path:
        return self.path / REPORT

    def read_spec(self) -> dict:
        """spec.json ({} when the run has none: records adopted or made by hand)."""
        return read_json(self.spec, "sweep spec") if self.spec.exists() else {}

    def read_sweep(self) -> SavedSweep:
        """spec.json as the typed sweep every reader takes (``rundir.saved``), checked once."""
        return SavedSweep.from_json(self.read_spec(), self.spec)

    def read_manifest(self) -> dict:
        """manifest.json ({} when the run has none)."""
        return read_json(self.manifest, "sweep manifest") if self.manifest.exists() else {}

    @property
    def samples(self) -> Path:
        return self.path / SAMPLES

    def read_samples(self) -> dict:
        """samples.jsonl (``sweep --log-samples``) by record key; empty without the file. A line cut
        by an interruption is skipped; a sample logged twice (its record was rescored) keeps the last."""
        return _by_record_key(self.samples)

    def append_samples(self, lines: str) -> None:
        """--log-samples: a batch's samples, written before its records (an interruption between the
        two leaves a sample whose record is rescored and logged again: readers keep the last)."""
        refuse_link(self.samples)
        append_text(self.samples, lines)

    @property
    def protocol(self) -> Path:
        return self.path / PROTOCOL

    def read_protocol(self) -> list[dict]:
        """protocol.jsonl: the items whose server answer broke the protocol, the last finding per
        item (a resumed sweep asks again); empty without the file. A line cut by an interruption is
        skipped."""
        return list(_by_record_key(self.protocol).values())

    def append_protocol(self, lines: str) -> None:
        refuse_link(self.protocol)
        append_text(self.protocol, lines)

    def append(self, lines: str) -> None:
        """Records appended in one write (a batch): an interruption loses at most its last line."""
        append_text(self.records, lines)

    def open_for_sweep(
        self, spec: dict, identity: SweepIdentity, fingerprint: str, planned: dict, make_manifest, adopt: bool = False
    ) -> dict:
        """Create or reopen a run directory. A reopened one must hold the same sweep (its spec.json
        upgraded and read back as ``identity``'s type: ``rundir.identity``) of the same model (weights
        fingerprint; the path it was reached by does not matter), and each kept record must have
        been scored on the prompt this sweep builds for its key (``planned``: key -> prompt digest);
        the manifest (a git call) is built only when it is missing."""
        out, spec_path, manifest_path = self.path, self.spec, self.manifest
        fix = f"delete {out} to start the sweep again, or use another --out"
        model_files = [name for name in MODEL_FILES if (out / name).exists()]
        if model_files:
            raise ProbeError(
                f"--out {out} holds a model ({', '.join(model_files)}), not a sweep: its manifest would be taken for "
                "the sweep's; write the sweep to another --out (e.g. a runs/ directory)"
            )
        from phasescope.rundir.owner import KINDS, kinds_of  # (owner reads this module's names)

        for kind, markers in kinds_of(out).items():
            if kind not in ("sweep", "model"):
                _, what, maker = KINDS[kind]
                raise ProbeError(
                    f"--out {out} holds {what} ({', '.join(markers)}, made by `{maker}`), not a sweep; write the "
                    "sweep to another --out (e.g. a runs/ directory)"
                )
        if spec_path.exists():
            saved = read_json(
                spec_path,
                "sweep spec",
                "its records are kept: restore spec.json (manifest.json holds the command that made it), or write this "
                "sweep to another --out",
            )
            check_schema(saved, spec_path)
            if _part(saved) != _part(spec):
                raise ProbeError(f"{out} holds {_part(saved)}; this sweep is {_part(spec)} (--shard): {fix}")
            if saved.get("shard") != spec.get("shard"):
                raise ProbeError(
                    f"{out} holds {_part(saved)} whose prompts differ from this sweep's (plan digest): an edited "
                    f"prompts or probe file, another tokenizer, or a phasescope that builds them differently; {fix}"
                )
            differ = differences_from(saved, identity)
            if differ:
                older = (
                    " (made before --same-phase existed: pass --mixed-phase to resume it)"
                    if "same_phase" in differ and "same_phase" not in json.dumps(saved)
                    else ""
                )
                raise ProbeError(
                    f"{out} holds a different sweep ({differ}){older}: rerun with the run's "
                    "values (its command is in manifest.json) to resume it, or use another --out"
                )
            self._check_same_model(fingerprint, fix, adopt, make_manifest)
        elif self.records.exists():
            raise ProbeError(f"{out} holds {RECORDS} but no {SPEC}: not a sweep this version can resume; {fix}")
        else:
            atomic_write_text(spec_path, json.dumps(spec, indent=2))
        if not manifest_path.exists():
            if fingerprint and self.records.exists() and self.records.stat().st_size and not adopt:
                raise ProbeError(
                    f"{out} holds records but no {MANIFEST}, which holds the fingerprint of the weights that scored "
                    "them: they cannot be checked to come from this model, and resuming could mix two models' "
                    f"records. Restore {MANIFEST}, or, if the records do come from this --model, rerun with "
                    "--adopt-records (it writes a new manifest for them)"
                )
            atomic_write_text(manifest_path, json.dumps(make_manifest(), indent=2))
        found = read_records(self.records)
        for number, record in enumerate(found.records, start=1):
            where = f"{self.records} line {number} (content {record.content_id!r}, offset {record.offset})"
            if record.key not in planned:
                raise ProbeError(f"{where} is not part of this sweep; {fix}")
            if record.prompt_digest is not None and record.prompt_digest != planned[record.key]:
                raise ProbeError(
                    f"{where} was scored on another prompt than this sweep builds for it (prompt digest "
                    f"{record.prompt_digest} in the run, {planned[record.key]} now): its contents changed since (an "
                    "edited prompts or probe file, another tokenizer or chat template, or a phasescope that builds "
                    f"them differently), and resuming would mix two sweeps' records; {fix}"
                )
        # a line cut by an interruption is dropped (it is rescored); a complete last line without its
        # newline gets one, so the next record is not appended onto it
        if found.truncated_tail or found.unterminated:
            atomic_write_text(self.records, "".join(r.line() for r in found.records))
        return {r.key: r for r in found.records}

    def _check_same_model(self, fingerprint: str, fix: str, adopt: bool = False, make_manifest=None) -> None:
        out, manifest_path = self.path, self.manifest
        if not manifest_path.exists():
            return
        repair = (
            f"its records are kept: if they come from this --model, move {manifest_path.name} aside (e.g. to "
            f"{manifest_path.name}.damaged) and rerun with --adopt-records: it is rebuilt from this model and every "
            "record is kept"
        )
        saved = read_json(manifest_path, "sweep manifest", repair).get("model_fingerprint") or ""
        if not saved and fingerprint and self.records.exists():
            raise ProbeError(
                f"{manifest_path} records no weights fingerprint, so its records cannot be checked to come from this "
                f"model; resuming could mix two models' records; {fix}"
            )
        if not (saved and fingerprint and saved != fingerprint):
            return
        moved = _moved_server(saved, fingerprint)
        # nothing scored (a first try that failed, e.g. at a wrong URL) leaves no records to mix; a moved
        # server with --adopt-records is the user vouching for the same server at a new address
        nothing_scored = not (self.records.exists() and self.records.stat().st_size > 0)
        if make_manifest is not None and (nothing_scored or (moved and adopt)):
            atomic_write_text(manifest_path, json.dumps(make_manifest(), indent=2))
            return
        if moved:
            raise ProbeError(
                f"{out} was swept from {moved[0]}; this sweep reads {moved[1]}: the server's address changed (a "
                "served model's identity is its address). If it is the same server and model at a new address, "
                "rerun with --adopt-records to keep the records and go on; if not, sweep into another --out"
            )
        raise ProbeError(
            f"{out} was swept with another model (weights fingerprint {saved}, now {fingerprint}): resuming "
            f"would mix two models' records; {fix}"
        )


def _part(spec: dict) -> str:
    shard = spec.get("shard")
    return "the whole sweep" if not shard else f"part {shard['index']} of {shard['count']} of a split sweep"


def _moved_server(saved: str, now: str) -> tuple[str, str] | None:
    """(the run's address, this sweep's) when both fingerprints are one served model's at two addresses."""
    if not (saved.startswith("served:") and now.startswith("served:")):
        return None
    (old_url, _, old_model), (new_url, _, new_model) = (f[7:].rpartition("#") for f in (saved, now))
    return (old_url, new_url) if old_model == new_model and old_url != new_url else None


class RunLock:
    """An exclusive lock on a run directory (released when the process ends, even by kill -9),
    so two sweeps never append to the same records.jsonl."""

    def __init__(self, out: Path | None):
        self.out, self.lock = out, None

    def __enter__(self):
        if self.out is None:
            return self
        from filelock import FileLock, Timeout

        if self.out.exists() and not self.out.is_dir():
            raise ProbeError(f"--out {self.out} is a file; pass a directory for the run")
        if self.out.is_symlink() and not self.out.exists():
            raise ProbeError(
                f"--out {self.out} is a link to {os.readlink(self.out)}, which does not exist: phasescope does not "
                "write through links; pass a directory of its own"
            )
        self.out.mkdir(parents=True, exist_ok=True)
        for name in RUN_FILES:  # a run directory from someone else must not redirect a write through a link
            refuse_link(self.out / name)
        self.lock = FileLock(self.out / LOCK, timeout=0)
        try:
            self.lock.acquire()
        except Timeout:
            raise ProbeError(
                f"another phasescope process is writing to {self.out} (its lock {self.out / LOCK} is held); "
                "wait for it to finish or use another --out"
            ) from None
        return self

    def __exit__(self, *exc) -> None:
        if self.lock is not None:
            self.lock.release()


def check_schema(saved: dict, path: Path) -> None:
    """A spec.json of a layout this version knows: 1 (no "schema" key) up to ``SCHEMA``; a newer
    one was written by a newer phasescope, whose fields this version would misread."""
    schema = saved.get("schema", 1)
    if not (isinstance(schema, int) and not isinstance(schema, bool) and 1 <= schema <= SCHEMA):
        raise InputError(
            f"{path}: schema {schema!r} is not a layout this phasescope reads (1 to {SCHEMA}); a newer phasescope "
            "wrote it: upgrade phasescope (pip install -U phasescope), or restore the spec.json the sweep wrote"
        )
