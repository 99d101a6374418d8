"""A sweep split across machines and merged exactly (docs/scale.md): ``sweep --shard I/N`` scores the
I-th of N parts (contents I, I + N, ...: a content's offsets, variants and shared prefix stay
together), ``merge`` joins the parts into the run the unsplit sweep writes, and ``sweep --ray``
runs the parts as tasks of an existing Ray cluster and merges them.

Why the parts are exact: the probe's stream draws every content in order whatever the part (a
part keeps only its own), so each content has the random state it has unsplit, hence the same
prompt, the same digest and, scored by the same model, the same record.

``merge`` checks that the parts are one sweep -- the same spec.json but for the part, the same
weights fingerprint, every part of the split present, no record in two parts, each record in the
part its content belongs to -- and names what is missing (a part, or the contents a part has not
scored yet) before it writes anything.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from phasescope.errors import InputError
from phasescope.rundir import MANIFEST, PROTOCOL, RECORDS, SAMPLES, SPEC, RunDir
from phasescope.rundir.files import atomic_write_text, read_json
from phasescope.rundir.records import Record, plan_digest, read_records

PARTS = "parts"  # sweep --ray --out DIR: each part's run directory under DIR/parts/
MERGED_FROM = "merged_from"  # spec.json of a merged run: the parts it was joined from
STORAGE_CHECK = ".storage-check"  # sweep --ray: written by the driver, read back by a worker
RETRIES = 2  # sweep --ray: a part that fails (a lost node, an out-of-memory kill) is run again, resuming


@dataclass
class Merged:
    run_dir: Path
    records: list[Record]
    parts: int


def merge(parts, out: str | Path) -> Merged:
    """Join the run directories of the N parts of one split sweep into ``out`` (see the module docstring)."""
    paths = [Path(p) for p in parts] if not isinstance(parts, (str, Path)) else [Path(parts)]
    paths = list({p.resolve(): p for p in paths}.values())  # a directory named twice is one part
    if not paths:
        raise InputError("merge takes the run directories of the parts of one split sweep (sweep --shard I/N)")
    out = _merged_out(out, "phasescope merge")
    specs = {path: _part_spec(path) for path in paths}
    count = _one_split(specs)
    fingerprints = {RunDir(p).read_manifest().get("model_fingerprint") for p in paths}
    if len(fingerprints) != 1:
        raise InputError(
            f"the parts were scored by different models (weights fingerprints {sorted(map(str, fingerprints))}): they "
            "are not one sweep; sweep every part with the same --model"
        )
    records = _joined(specs, count)
    _write(out, paths, specs, records)
    return Merged(out, records, count)


def _merged_out(out, command: str) -> Path:
    """``out`` checked to be a directory merge may write: new, or a run merge wrote (merged again)."""
    from phasescope.rundir.owner import claim_out

    if out is None:
        raise InputError(f"`{command}` writes a run directory: pass --out DIR (out= in Python)")
    out = claim_out(out, command, may_hold=("sweep",))
    if RunDir(out).spec.exists() and MERGED_FROM not in read_json(RunDir(out).spec, "sweep spec", ""):
        raise InputError(f"--out {out} holds a sweep run that merge did not write: pass a directory of its own")
    return out


def _part_spec(path: Path) -> dict:
    if not RunDir(path).spec.exists():
        raise InputError(f"{path} is not a part of a split sweep: it has no {SPEC} (pass the --out of sweep --shard)")
    spec = read_json(RunDir(path).spec, "sweep spec", "restore it, or sweep that part again")
    if "shard" not in spec:
        raise InputError(f"{path} holds a whole sweep, not a part (no --shard): there is nothing to merge it with")
    return spec


def _same_sweep(spec: dict) -> dict:
    """What must be equal in every part: the spec but for the part (a part's spec.json is the
    unsplit sweep's, its default batch size included, plus its ``shard``)."""
    return {k: v for k, v in spec.items() if k != "shard"}


def _one_split(specs: dict[Path, dict]) -> int:
    """The split's N, after checking the parts are one sweep and every part is there once."""
    first_path, first = next(iter(specs.items()))
    counts = {s["shard"]["count"] for s in specs.values()}
    if len(counts) != 1:
        raise InputError(f"the parts come from splits into {sorted(counts)} parts: merge the parts of one split")
    for path, spec in specs.items():
        if _same_sweep(spec) != _same_sweep(first):
            differ = sorted(k for k in set(spec) | set(first) if spec.get(k) != first.get(k) and k not in ("shard",))
            raise InputError(
                f"{path} and {first_path} are parts of different sweeps (spec.json differs in {', '.join(differ)}): "
                "merge the parts of one sweep command"
            )
    plans = {s["shard"].get("plan_sha256") for s in specs.values()}
    if len(plans) != 1:
        raise InputError(
            "the parts built different prompts from one spec (their plan digests differ): another prompts or probe "
            "file, tokenizer or phasescope version in some part; sweep every part in the same environment"
        )
    count = counts.pop()
    seen: dict[int, Path] = {}
    for path, spec in specs.items():
        index = spec["shard"]["index"]
        if index in seen:
            raise InputError(f"{path} and {seen[index]} are both part {index} of {count}: pass each part once")
        seen[index] = path
    missing = sorted(set(range(count)) - set(seen))
    if missing:
        raise InputError(
            f"parts {', '.join(map(str, missing))} of {count} are missing: sweep them (--shard "
            f"{missing[0]}/{count} ...) and pass every part's directory"
        )
    return count


def _joined(specs: dict[Path, dict], count: int) -> list[Record]:
    """Every part's records, checked to be its own and not another's, and complete."""
    by_key: dict[tuple, Path] = {}
    records = []
    first = next(iter(specs.values()))
    by_sample = first.get("contents_by_sample", True)
    for path, spec in specs.items():
        index = spec["shard"]["index"]
        for r in read_records(RunDir(path).records).records:
            if r.key in by_key:
                raise InputError(
                    f"content {r.content_id!r} offset {r.offset} is in {path} and in {by_key[r.key]}: the parts overlap"
                )
            if by_sample and isinstance(r.content_id, int) and r.content_id % count != index:
                raise InputError(
                    f"{path} holds content {r.content_id}, which part {r.content_id % count} of {count} scores, not "
                    f"part {index}: the record was moved between parts; delete it and rerun that part"
                )
            by_key[r.key] = path
            records.append(r)
    _complete(specs, records, count)
    _same_prompts(first.get("shard", {}).get("plan_sha256"), records)
    return sorted(records, key=lambda r: (str(type(r.content_id)), r.content_id, r.offset, r.variant))


def _complete(specs: dict[Path, dict], records: list[Record], count: int) -> None:
    """Every content of the sweep at every offset and rendering (contents numbered 0 .. samples-1)."""
    first = next(iter(specs.values()))
    samples, offsets = first.get("samples"), first.get("offsets") or []
    if not first.get("contents_by_sample", True) or not isinstance(samples, int):
        return
    renderings = max((r.variant for r in records), default=0) + 1
    per_content: dict[int, int] = {}
    for r in records:
        per_content[r.content_id] = per_content.get(r.content_id, 0) + 1
    short = [c for c in range(samples) if per_content.get(c, 0) < len(offsets) * renderings]
    if short:
        parts = sorted({c % count for c in short})
        raise InputError(
            f"contents {', '.join(map(str, short[:10]))}{' ...' if len(short) > 10 else ''} are not scored at every "
            f"offset yet (parts {', '.join(map(str, parts))} of {count}): rerun those parts' sweeps (the same command "
            "resumes) and merge again"
        )


def _same_prompts(planned: str | None, records: list[Record]) -> None:
    """The joined records' prompts are the ones the unsplit sweep builds: their keys and prompt
    digests hash to the plan digest every part saved (each part built the whole sweep's prompts)."""
    if planned is None or any(r.prompt_digest is None for r in records):
        return
    if plan_digest({r.key: r.prompt_digest for r in records}) != planned:
        raise InputError(
            "the parts' records are not the prompts their sweep builds (their prompt digests differ from the plan "
            "every part saved): a record was edited or copied in from another run; sweep the parts again"
        )


def _write(out: Path, paths: list[Path], specs: dict[Path, dict], records: list[Record]) -> None:
    """The merged run: spec.json as the unsplit sweep writes it (and the parts it came from), part 0's
    manifest with the parts' commands, the records, and the parts' samples and protocol findings."""
    out.mkdir(parents=True, exist_ok=True)
    first_path = min(paths, key=lambda p: specs[p]["shard"]["index"])
    spec = {k: v for k, v in specs[first_path].items() if k != "shard"} | {MERGED_FROM: [str(p) for p in paths]}
    atomic_write_text(out / SPEC, json.dumps(spec, indent=2))
    manifest = RunDir(first_path).read_manifest()
    manifest["parts"] = [{"path": str(p), "command": RunDir(p).read_manifest().get("command")} for p in paths]
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=2))
    atomic_write_text(out / RECORDS, "".join(r.line() for r in records))
    for name in (SAMPLES, PROTOCOL):
        texts = [(p / name).read_text() for p in paths if (p / name).is_file()]
        if texts:
            atomic_write_text(out / name, "".join(texts))


# -- Ray ------------------------------------------------------------------------------------------


def run_on_ray(model: str, address: str | None, parts: int | None, say=lambda _text: None, **options) -> Merged:
    """``sweep --ray``: the sweep's parts as tasks of a Ray cluster (``address``, else RAY_ADDRESS;
    "local" starts one here), each into OUT/parts/part-I, with the resources it needs (a GPU for a
    local model where the cluster has GPUs, none for a served one), retried on failure; one
    progress line over all parts; merged into OUT at the end. A rerun resumes every part."""
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs Ray: pip install 'phasescope[ray]'") from None
    if "shard" in options or options.get("dry_run"):
        raise InputError(
            "--ray splits the sweep itself and does not dry-run: drop shard / dry_run (a dry run of every part: "
            "phasescope.sweep(..., shard=(0, N), dry_run=True))"
        )
    if parts is not None and parts < 1:
        raise InputError(f"--ray-parts {parts}: split the sweep into 1 part or more")
    out = _merged_out(options.pop("out", None), "phasescope sweep --ray")
    served = model.startswith("openai:")
    where = address or os.environ.get("RAY_ADDRESS")
    if not where:
        raise InputError(
            "--ray joins an existing Ray cluster: set RAY_ADDRESS or pass --ray-address (e.g. ray://head:10001, or "
            "local to start one on this machine)"
        )
    earlier = _earlier_split(out, parts)
    ray.init(address=None if where == "local" else where, ignore_reinit_error=True, log_to_driver=False)
    try:
        n = earlier or _parts(parts, served, options.get("samples"), ray.cluster_resources())
        part_dirs = [out / PARTS / f"part-{i}" for i in range(n)]
        _check_storage(ray, out)
        gpus = 1 if not served and ray.cluster_resources().get("GPU", 0) >= 1 else 0
        task = ray.remote(_sweep_part).options(num_cpus=1, num_gpus=gpus, max_retries=RETRIES, retry_exceptions=True)
        say(f"ray: {n} parts on {where} ({'one GPU' if gpus else 'one CPU'} each), into {out / PARTS}")
        pending = [task.remote(model, i, n, str(d), options) for i, d in enumerate(part_dirs)]
        _wait(ray, pending, part_dirs, say)
    finally:
        ray.shutdown()
    return merge(part_dirs, out)


def _earlier_split(out: Path, parts: int | None) -> int | None:
    """The N of the split an earlier ``sweep --ray`` into ``out`` made (a rerun resumes it), or None."""
    spec = out / PARTS / "part-0" / SPEC
    if not spec.is_file():
        return None
    count = (read_json(spec, "sweep spec", f"delete {out / PARTS} to start the parts again").get("shard") or {}).get(
        "count"
    )
    if parts is not None and count is not None and parts != count:
        raise InputError(
            f"{out / PARTS} holds an earlier run split into {count} parts, not {parts}: rerun with --ray-parts {count} "
            f"(or without it) to resume it, or delete {out / PARTS} to split it again"
        )
    return count


def _sweep_part(model: str, index: int, count: int, out: str, options: dict) -> int | str:
    """One part, in a Ray worker: the sweep with ``--shard index/count`` (it resumes what is on
    disk). A mistake in the input is returned as its message (retrying would repeat it); any other
    failure raises, and Ray retries the part."""
    from phasescope.api import sweep

    try:
        return len(sweep(model, shard=(index, count), out=out, progress=False, **options).records)
    except InputError as err:
        return str(err)


def _parts(parts: int | None, served: bool, samples: int | None, resources: dict) -> int:
    """The number of parts: as asked, else the cluster's GPUs (local model) or CPUs (served), at most
    the contents when --samples says how many (a part holds whole contents)."""
    if parts is None:
        parts = int(resources.get("CPU" if served or not resources.get("GPU") else "GPU", 1))
    return max(1, min(parts, samples) if samples else parts)


def _check_storage(ray, out: Path) -> None:
    """--out must be storage every worker reaches: the driver writes a token there, a task reads it."""
    out.mkdir(parents=True, exist_ok=True)
    token = f"{os.getpid()}-{time.time_ns()}"
    atomic_write_text(out / STORAGE_CHECK, token)

    def read(path: str) -> str | None:
        try:
            return Path(path).read_text()
        except OSError:
            return None

    seen = ray.get(ray.remote(read).options(num_cpus=0).remote(str((out / STORAGE_CHECK).resolve())))
    (out / STORAGE_CHECK).unlink(missing_ok=True)
    if seen != token:
        raise InputError(
            f"a Ray worker cannot read {out.resolve()}: the parts would be written where the driver cannot merge them; "
            "pass an --out on storage every node of the cluster reaches (a shared file system)"
        )


def _wait(ray, pending: list, part_dirs: list[Path], say) -> None:
    """Until every part has finished: one progress line (records on disk over all parts, parts
    done); a part that fails after its retries is an error naming it (the others' records are kept)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    total = None
    with Progress(TextColumn("ray"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}")) as bar:
        job = bar.add_task(f"parts 0 of {len(pending)} done", total=None)
        done: list = []
        while len(done) < len(pending):
            ready, _ = ray.wait([p for p in pending if p not in done], timeout=1.0)
            for ref in ready:
                index = pending.index(ref)
                try:
                    answer = ray.get(ref)
                except Exception as err:  # noqa: BLE001 -- a task's failure, whatever it was
                    raise InputError(
                        f"part {index} of {len(pending)} failed after {RETRIES} retries ({type(err).__name__}: "
                        f"{str(err)[-400:]}); the parts' records are kept in {part_dirs[index].parent}: rerun the same "
                        "command to resume"
                    ) from None
                if isinstance(answer, str):
                    raise InputError(f"part {index} of {len(pending)}: {answer}")
                done.append(ref)
            total = total or _expected(part_dirs)
            scored = sum(_lines(d / RECORDS) for d in part_dirs)
            bar.update(job, completed=scored, total=total, description=f"parts {len(done)} of {len(pending)} done")
    say(f"ray: {len(pending)} parts done")


def _expected(part_dirs: list[Path]) -> int | None:
    """Records of the whole sweep, once a part's spec.json says its size (contents x offsets x renderings)."""
    for d in part_dirs:
        if (d / SPEC).is_file():
            spec = read_json(d / SPEC, "sweep spec", "")
            offsets, samples = spec.get("offsets") or [], spec.get("samples")
            gaps = (spec.get("probe") or {}).get("kv_gaps") or [0]
            if isinstance(samples, int):
                return samples * len(offsets) * len(gaps)
    return None


def _lines(path: Path) -> int:
    try:
        with path.open("rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


__all__ = ["MERGED_FROM", "PARTS", "Merged", "merge", "run_on_ray"]
