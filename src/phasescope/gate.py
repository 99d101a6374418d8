"""A serving stack's regression gate: the paired comparison read as pass or fail, in the forms a CI
job reads (docs/serving.md, 'Catch serving regressions in CI').

``compare --paired A B`` and ``phasescope check`` exit as ``diff`` does: 0 when B does not depart
from A beyond the thresholds, 1 when it does, 2 on an error. The checks, each a line of the JSON
summary, a test case of the JUnit XML and a row of the Markdown summary:

    check         fails when
    answers       B's answers differ from A's (either way) on more records than --max-departures
    log-prob      B's log-prob of the right answer differs from A's by more than --logprob-tol nats
                  on more records than --max-departures
    departures    the departure tests (analysis/departures.py) find B departing: p < --alpha
    protocol      a run holds records whose server answer broke the protocol (a short generation,
                  other prompt ids than sent, missing or non-finite log-probs): any
    request state the same prompt sent twice was answered differently (check's repeat pass): any

A reproducer is saved for each failing cell (needle phase x prompt-end phase x length band): the
first departing record's prompt ids, what was expected and what each run answered, its lengths and
phases, the servers' versions, and the request body that replays it (``phasescope replay``).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from phasescope.analysis.departures import most_departing
from phasescope.errors import InputError
from phasescope.phases import FACTORS, candidate_periods
from phasescope.rundir import GATE, JUNIT, REPRODUCERS, SUMMARY_MD
from phasescope.rundir.files import atomic_write_text

PASS, FAIL = 0, 1  # exit statuses; 2 is every error (cli/app.py)


@dataclass(frozen=True)
class Thresholds:
    """What a stack may do before the gate fails. ``max_departures``: records (``"3"``) or a share
    of the records compared (``"0.5%"``)."""

    max_departures: str = "0"
    alpha: float = 0.05
    logprob_tol: float = 1.0

    def __post_init__(self) -> None:
        self.allowed(1)  # checks the text
        if not 0 < self.alpha < 1:
            raise InputError(f"--alpha {self.alpha!r} is invalid; allowed: a level in (0, 1), e.g. 0.05")
        if not self.logprob_tol >= 0:
            raise InputError(f"--logprob-tol {self.logprob_tol!r} is invalid; allowed: nats >= 0, e.g. 1.0")

    def allowed(self, n_records: int) -> float:
        """How many departing records pass, out of ``n_records``."""
        text = str(self.max_departures).strip()
        try:
            if text.endswith("%"):
                share = float(text[:-1])
                if not 0 <= share <= 100:
                    raise ValueError
                return share / 100 * n_records
            count = int(text)
            if count < 0:
                raise ValueError
            return float(count)
        except ValueError:
            raise InputError(
                f"--max-departures {self.max_departures!r} is invalid; allowed: a count of records (0, 3) or a "
                "share of the records compared (0.5%)"
            ) from None


def decide(paired: dict, thresholds: Thresholds, protocol: dict | None = None, repeats: dict | None = None) -> dict:
    """The gate's verdict from ``paired`` (``results.paired``), the protocol findings of each run
    (``protocol_findings``) and the repeat pass's (``phasescope check``)."""
    n = paired["n_pairs"]
    allowed = thresholds.allowed(n)
    if n == 0 and not protocol:
        raise InputError("no record to compare and no protocol finding: the runs are empty; run their sweeps first")
    kinds = paired["kinds"]
    answers = sum(kinds[k]["departures"] for k in ("wrong", "right") if k in kinds)
    checks = [
        _check(
            "answers",
            answers <= allowed,
            f"{answers} of {n} records answered differently (allowed: {_allowed(thresholds, allowed)})",
        )
    ]
    if "logprob" in kinds:
        beyond = kinds["logprob"]["departures"]
        largest = (paired.get("logprob") or {}).get("largest_abs")
        checks.append(
            _check(
                "log-prob",
                beyond <= allowed,
                f"{beyond} of {n} records moved the right answer's log-prob by more than {thresholds.logprob_tol:g} "
                f"nats (largest |Δ| {_nats(largest)}; allowed: {_allowed(thresholds, allowed)})",
            )
        )
    p = paired.get("p_value", 1.0)
    checks.append(
        _check(
            "departures",
            p >= thresholds.alpha,
            f"departure tests: smallest p = {p:.3g}, Holm-adjusted (fails below {thresholds.alpha:g})",
        )
    )
    if protocol is not None:
        faults = sum(v["records"] for v in protocol.values())
        named = "; ".join(
            f"{run}: {v['records']} ({', '.join(v['kinds'])})" for run, v in protocol.items() if v["records"]
        )
        checks.append(
            _check(
                "protocol",
                faults == 0,
                f"{faults} records broke the server protocol" + (f" ({named})" if named else ""),
            )
        )
    if repeats is not None:
        differ = repeats["differ"]
        checks.append(
            _check(
                "request state",
                differ == 0,
                f"{differ} of {repeats['repeated']} prompts sent again (in a shuffled order, seed {repeats['seed']}) "
                "were answered differently" + (f": {repeats['sentence']}" if differ else ""),
            )
        )
    passed = all(c["passed"] for c in checks)
    return {
        "passed": passed,
        "exit_code": PASS if passed else FAIL,
        "names": paired["names"],
        "checks": checks,
        "findings": findings(paired, thresholds.alpha),
        "sentence": paired["sentence"],
        "thresholds": asdict(thresholds),
        "n_pairs": n,
        "lengths": paired.get("lengths"),
        "bands": paired.get("bands"),
        "largest_abs_logprob_diff": (paired.get("logprob") or {}).get("largest_abs"),
    }


def _check(name: str, passed: bool, message: str) -> dict:
    return {"name": name, "passed": bool(passed), "message": message}


def _allowed(thresholds: Thresholds, allowed: float) -> str:
    text = str(thresholds.max_departures).strip()
    return text if not text.endswith("%") else f"{text} = {allowed:.1f} records"


def _nats(value) -> str:
    return "-" if value is None else f"{value:.3g} nats"


def findings(paired: dict, alpha: float) -> list[dict]:
    """What each kind of departure follows, as the CI summary names it: the factor, its period and
    residue (or none), with the counts."""
    out = []
    for kind, entry in paired["kinds"].items():
        if not entry["departures"]:
            continue
        test = entry.get("test") or {}
        adjusted = paired["adjusted_p"].get(kind)
        row = {"kind": kind, "departures": entry["departures"], "of": entry["base"], "follows": None, "p": adjusted}
        if test.get("p_value") is not None and adjusted is not None and adjusted < alpha:
            tops = most_departing(test["classes"])
            top = tops[0]
            factor = test["factor"]
            row |= {
                "units": test.get("units", "records"),
                "follows": factor,
                "period": test["period"],
                "value": top["value"],
                "where": " or ".join(_words(paired, factor, test["period"], c["value"]) for c in tops),
                "there": [top["departures"], top["n"]],
                "tied": [c["value"] for c in tops[1:]],  # classes at the same departure rate
            }
            if also := test.get("also"):  # a second factor within the first's classes (a combination)
                inner = most_departing(also["classes"])[0]
                row["also"] = {
                    "follows": also["factor"],
                    "period": also["period"],
                    "where": _words(paired, also["factor"], also["period"], inner["value"]),
                    "p": also["p_value"],
                }
        out.append(row)
    return out


def _words(paired: dict, factor: list[str], period: int | None, value: int) -> str:
    if factor == ["length"]:
        band = paired["bands"][value]
        return "length band is the default length" if band is None else f"length band is {band:,} tokens"
    return FACTORS[factor[0]].describe(value, period, paired["step"], paired.get("align", 0))


# -- what CI reads ------------------------------------------------------------------------------


def junit_xml(gate: dict) -> str:
    """One test suite, one test case per check (a failure carries its message), as pytest's
    ``--junitxml`` writes."""
    cases = []
    for c in gate["checks"]:
        body = "" if c["passed"] else f"<failure message={quoteattr(c['message'])}>{escape(gate['sentence'])}</failure>"
        cases.append(f'  <testcase classname="phasescope.check" name={quoteattr(c["name"])}>{body}</testcase>')
    failures = sum(not c["passed"] for c in gate["checks"])
    a, b = gate["names"]
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        f'<testsuites><testsuite name={quoteattr(f"phasescope: {b} against {a}")} tests="{len(cases)}" '
        f'failures="{failures}" errors="0" skipped="0">\n' + "\n".join(cases) + "\n</testsuite></testsuites>\n"
    )


def markdown(gate: dict, reproducers: list[Path] | None = None) -> str:
    """A summary for a CI job's page (GitHub's $GITHUB_STEP_SUMMARY)."""
    a, b = gate["names"]
    head = "passed" if gate["passed"] else "**failed**"
    lines = [
        f"### phasescope: {b} against {a}: {head}",
        "",
        gate["sentence"],
        "",
        "| check | result | detail |",
        "|---|---|---|",
    ]
    for c in gate["checks"]:
        detail = c["message"].replace("|", r"\|")
        lines.append(f"| {c['name']} | {'pass' if c['passed'] else 'FAIL'} | {detail} |")
    found = [f for f in gate["findings"] if f["follows"]]
    if found:
        lines += ["", "What the departures follow:", ""]
        lines += [
            f"- {f['kind']}: {f['where']} ({f['there'][0]} of {f['there'][1]} {f['units']})"
            + (f"; within it, {f['also']['where']}" if f.get("also") else "")
            for f in found
        ]
    if reproducers:
        lines += [
            "",
            f"Reproducers ({len(reproducers)}): replay one with `phasescope replay FILE --model openai:URL#MODEL`",
            "",
        ]
        lines += [f"- `{path}`" for path in reproducers[:20]]
    return "\n".join(lines) + "\n"


def write_gate(out: Path, gate: dict, reproducers: list[Path] | None = None) -> list[Path]:
    """gate.json, junit.xml and summary.md in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    files = {
        GATE: json.dumps(gate, indent=1, allow_nan=False) + "\n",
        JUNIT: junit_xml(gate),
        SUMMARY_MD: markdown(gate, reproducers),
    }
    for name, text in files.items():
        atomic_write_text(out / name, text)
    return [out / name for name in files]


# -- reproducers --------------------------------------------------------------------------------


def reproducers(
    pairs: list, paired: dict, samples: tuple[dict, dict], servers: tuple[dict | None, dict | None], tolerance: float
) -> list[dict]:
    """One reproducer per failing cell (needle phase x the failing request's prompt-end phase x
    length band, at the step): the first departing record there -- a wrong answer before a moved
    log-prob --, with what is needed to send its failing request again. ``samples``: each run's
    samples.jsonl by record key (``RunDir.read_samples``); a record without its prompt ids gets a
    reproducer without a request (its note says how to have one)."""
    step = paired["step"]
    found: dict[tuple, tuple] = {}
    for a, b in sorted(pairs, key=lambda pair: _sort_key(pair[1].key)):
        departure = _departure(a, b, tolerance)
        if departure is None or b.answer_pos is None or b.anchor_pos is None:
            continue
        kind, j = departure
        align = b.align or 0
        cell = ((b.anchor_pos - align) % step, (b.answer_pos + j - align) % step, getattr(b, "context_tokens", None))
        if cell not in found or (found[cell][2] == "logprob" and kind != "logprob"):
            found[cell] = (a, b, kind, j)
    return [_reproducer(*found[cell], paired["names"], samples, servers, step) for cell in sorted(found, key=str)]


def _sort_key(key: tuple) -> tuple:
    return tuple(str(k) if isinstance(k, str) else f"{k:012d}" for k in key)


def _departure(a, b, tolerance: float) -> tuple[str, int] | None:
    """(the kind of departure, the index j of the request that departed: the prompt + the answer's
    first j tokens), or None when the pair agrees."""
    right = True if a is None else bool(a.correct)
    if right != bool(b.correct):
        kind = "wrong" if right else "right"
        if b.answer_from == "generation" or not b.token_correct:
            return kind, 0  # one generation from the prompt decided it
        mine = b.token_correct
        theirs = [True] * len(mine) if a is None or not a.token_correct else a.token_correct
        return kind, next((j for j, (x, y) in enumerate(zip(theirs, mine, strict=False)) if x != y), 0)
    if a is not None and abs(b.logprob_target - a.logprob_target) > tolerance:
        if a.token_logprobs and b.token_logprobs and len(a.token_logprobs) == len(b.token_logprobs):
            moved = [abs(x - y) for x, y in zip(a.token_logprobs, b.token_logprobs, strict=True)]
            return "logprob", moved.index(max(moved))
        return "logprob", 0
    return None


def _reproducer(a, b, kind: str, j: int, names, samples, servers, step: int) -> dict:
    align = b.align or 0
    sample = samples[1].get(b.key) or samples[0].get(b.key) or {}
    prompt = sample.get("prompt_ids")
    target = (sample.get("candidates") or {}).get(b.target)
    what = {
        "wrong": f"{names[1]} is wrong where {names[0]} is right",
        "right": f"{names[1]} is right where {names[0]} is wrong",
        "logprob": f"{names[1]}'s log-prob of the right answer differs from {names[0]}'s",
    }[kind]
    length = b.answer_pos + j  # the failing request's prompt: the prompt and the answer's first j tokens
    residues = {
        name: {str(p): int(f.position(b.anchor_pos, length, align) % p) for p in candidate_periods(step)}
        for name, f in FACTORS.items()
    }
    entry = {
        "what": what,
        "kind": kind,
        "content_id": b.content_id,
        "offset": b.offset,
        "variant": b.variant,
        "prompt_length": b.answer_pos,
        "request_length": length,
        "answer_tokens_given": j,
        "needle_pos": b.anchor_pos,
        "context_tokens": getattr(b, "context_tokens", None),
        "request_lengths": b.request_lengths,
        "step": step,
        "align": align,
        "phases": {name: residues[name][str(step)] for name in FACTORS},
        "residues": residues,
        "expected_ids": None if target is None else target[j:],
        "expected_text": b.target_text,
        names[0]: None if a is None else _answer(a, servers[0]),
        names[1]: _answer(b, servers[1]),
        "prompt_ids": None if prompt is None or target is None else prompt + target[:j],
    }
    if entry["prompt_ids"] is not None:
        entry["request"] = request_body(
            entry["prompt_ids"], len(entry["expected_ids"]), (servers[1] or {}).get("model")
        )
    else:
        entry["note"] = "the runs hold no prompt ids (sweep with --log-samples, as phasescope check does, to replay it)"
    return entry


def _answer(record, server: dict | None) -> dict:
    return {
        "correct": record.correct,
        "answer_ids": record.answer_ids,
        "answer_text": record.answer_text,
        "logprob_target": record.logprob_target,
        "answer_from": record.answer_from,
        "server": server,
    }


def request_body(prompt: list[int], max_tokens: int, model: str | None) -> dict:
    """The OpenAI-compatible completions request a deployed stack answers the prompt with: greedy,
    as many tokens as the right answer has, token ids back (vLLM)."""
    return {
        "model": model or "MODEL",
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "logprobs": 1,
        "return_tokens_as_token_ids": True,
        "return_token_ids": True,
    }


def write_reproducers(out: Path, found: list[dict]) -> list[Path]:
    """``out/reproducers/cell-N.json`` (the reproducer) and ``cell-N.request.json`` (its request body
    alone, for curl) for each."""
    if not found:
        return []
    folder = out / REPRODUCERS
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, entry in enumerate(found):
        phases = entry["phases"]
        stem = f"cell-{i:02d}-needle{phases['needle']}-end{phases['end']}"
        if entry.get("context_tokens"):
            stem += f"-{entry['context_tokens']}"
        atomic_write_text(folder / f"{stem}.json", json.dumps(entry, indent=1, allow_nan=False) + "\n")
        if entry.get("request"):
            atomic_write_text(folder / f"{stem}.request.json", json.dumps(entry["request"]) + "\n")
        paths.append(folder / f"{stem}.json")
    return paths


def protocol_findings(found: list[dict], scored: set) -> dict:
    """The items whose server answer broke the protocol (``RunDir.read_protocol``) and that no later
    answer scored (a resumed sweep asks again): how many, of which kinds, the first few."""
    open_ = [f for f in found if (f["content_id"], f["offset"], f.get("variant", 0)) not in scored]
    kinds = sorted({f["kind"] for f in open_})
    examples = [{k: f.get(k) for k in ("content_id", "offset", "variant", "kind", "message")} for f in open_[:5]]
    return {"records": len(open_), "kinds": kinds, "examples": examples}


__all__ = [
    "FAIL",
    "PASS",
    "Thresholds",
    "decide",
    "findings",
    "junit_xml",
    "markdown",
    "protocol_findings",
    "reproducers",
    "request_body",
    "write_gate",
    "write_reproducers",
]
