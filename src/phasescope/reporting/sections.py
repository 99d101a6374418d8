"""Optional report.html sections, one per file a run directory may hold besides the sweep:

* ``ablation.json`` (`phasescope ablate --out RUN`): head x phase heatmap of the accuracy
  change, per-head specialization table, and the held-out causal contrasts when present;
* ``preferences.json`` (`phasescope preferences --out RUN`): pooling weight per window slot
  per layer and KV head, and the comparison with the run when present;
* ``theory.json`` (`phasescope theory --out RUN`): the gradient-flow figures and headline numbers.

Each section reads only its JSON (no model); keys it does not know are ignored, and a missing
(None) statistic prints "not estimable". A file that cannot be read, or does not have the shape
its command writes, gives a note in the report instead of a section, never a failed report.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable
from pathlib import Path

from phasescope.errors import InputError
from phasescope.reporting.figures import ablation_heatmap, preference_weights
from phasescope.reporting.text import interval, number
from phasescope.rundir import ABLATION, FIGURES, PREFERENCES, PREFERENCES_FIGURE, THEORY
from phasescope.rundir.files import read_json

NA = "not estimable"


def optional_sections(run_dir: Path) -> str:
    """The HTML of every section whose file is in ``run_dir`` ("" when none is)."""
    parts = []
    for filename, (title, command, render) in SECTIONS.items():
        path = run_dir / filename
        if not path.exists():
            continue
        try:
            parts.append(render(read_json(path, f"{command} output"), run_dir / FIGURES))
        except InputError as err:
            parts.append(_note(title, str(err)))
        except (KeyError, TypeError, ValueError, IndexError) as err:
            problem = f"{type(err).__name__}: {err}"
            parts.append(_note(title, f"{path} does not have the shape `{command}` writes ({problem})"))
    return "".join(parts)


def figure_tag(path: Path) -> str:
    """``path`` (a PNG) embedded as an <img>, its file name as alt text."""
    data = base64.b64encode(path.read_bytes()).decode()
    return f'<figure><img alt="{html.escape(path.name)}" src="data:image/png;base64,{data}"></figure>'


def _note(title: str, text: str) -> str:
    return f"<h2>{html.escape(title)}</h2><p>not shown: {html.escape(text)}</p>"


def _table(head: list[str], rows: list[list[str]], caption: str = "") -> str:
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    top = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{cap}{top}{body}</table>"


def _items(lines: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in lines) + "</ul>"


def _pp(value, fmt: str = "+.1f") -> str:
    """A fraction (0..1) as percentage points, or "not estimable"."""
    return NA if value is None else format(100 * value, fmt)


def _percent(value) -> str:
    """A fraction (0..1) as a whole percentage, or "not estimable"."""
    return NA if value is None else f"{100 * value:.0f}%"


def _head_name(layer, head) -> str:
    return f"L{layer}H{head}"


# ---- ablation.json ---------------------------------------------------------------------------


def _require(data, keys: tuple[str, ...]) -> None:
    """A section file must carry what its command writes; anything else is a note, not a section."""
    missing = [k for k in keys if not isinstance(data, dict) or k not in data]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")


def ablation_section(ablation: dict, figures: Path) -> str:
    _require(ablation, ("heads", "baseline", "mode", "step"))
    heads = ablation.get("heads") or []
    model = f" of {ablation['model']}" if ablation.get("model") else ""
    baseline = "  ".join(f"{b['phase']}: {_percent(b.get('accuracy'))}" for b in ablation.get("baseline") or [])
    lines = [
        f"{ablation.get('mode', '?')} ablation of {len(heads)} heads{model}, step {ablation.get('step')}, "
        f"{ablation.get('samples', '?')} contents x {len(ablation.get('offsets') or [])} offsets",
        f"baseline accuracy by phase: {baseline or NA}",
    ]
    if ablation.get("note"):
        lines.append(ablation["note"])
    parts = ["<h2>Head ablation</h2>", _items(lines)]
    if heads:
        path = figures / "ablation_heatmap.png"
        ablation_heatmap(ablation, path)
        parts += [figure_tag(path), _head_table(heads, ablation.get("alpha"))]
    if isinstance(ablation.get("causal"), list):
        parts.append(_causal_table(ablation["causal"]))
    return "".join(parts)


def _head_table(heads: list[dict], alpha) -> str:
    head = ["head", "accuracy: specialization index (pp)", "preferred phase", "p", "Holm p", "flag"]
    head += ["log-prob: index", "preferred phase", "Holm p", "flag"]
    rows = []
    for h in heads:
        acc, lp = h.get("accuracy") or {}, h.get("logprob") or {}
        rows.append(
            [
                _head_name(h["layer"], h["head"]),
                _pp(acc.get("index"), ".1f"),
                number(acc.get("preferred_phase"), "d", NA),
                number(acc.get("p_value"), ".3g", NA),
                number(acc.get("p_holm"), ".3g", NA),
                "SPECIALIZED" if acc.get("specialized") else "",
                number(lp.get("index"), ".3f", NA),
                number(lp.get("preferred_phase"), "d", NA),
                number(lp.get("p_holm"), ".3g", NA),
                "SPECIALIZED" if lp.get("specialized") else "",
            ]
        )
    level = f" < {alpha:g}" if alpha is not None else ""
    caption = (
        "index = max - min over phases of the mean drop when the head is removed; preferred phase = the "
        f"phase hurt most; SPECIALIZED: Holm-corrected within-content permutation p{level}"
    )
    return _table(head, rows, caption)


def _causal_table(causal: list[dict]) -> str:
    head = ["phase", "heads removed", "k", "contrast (pp) [95% CI]", "contents", "p"]
    rows = []
    for c in causal:
        contrast = _pp(c.get("contrast"))
        if c.get("contrast") is not None:
            pair = (c.get("ci_low"), c.get("ci_high"))
            contrast += interval([100 * v for v in pair]) if None not in pair else f" (interval {NA})"
        rows.append(
            [
                str(c.get("phase")),
                ", ".join(_head_name(*lh) for lh in c.get("heads") or []) or "none",
                str(c.get("k", "")),
                contrast,
                str(c.get("n_contents", "")),
                number(c.get("p_value"), ".3g", NA),
            ]
        )
    caption = (
        "held-out causal check: the top-k heads for a phase removed together; contrast = accuracy drop at "
        "that phase minus the mean drop at the other phases"
    )
    return "<h3>Causal contrast per phase</h3>" + _table(head, rows, caption)


# ---- preferences.json ------------------------------------------------------------------------


def preferences_section(prefs: dict, figures: Path) -> str:
    layers = prefs.get("layers") or []
    lines = [f"{prefs.get('n_rows', '?')} task rows of {prefs.get('seq_len', '?')} tokens (seed {prefs.get('seed')})"]
    if prefs.get("note"):
        lines.append(prefs["note"])
    parts = ["<h2>Learned position preferences</h2>", _items(lines)]
    comparison = prefs.get("run_comparison")
    if layers:
        path = figures / PREFERENCES_FIGURE
        preference_weights(prefs, path, comparison)
        parts.append(figure_tag(path))
    parts += [_layer_table(layer) for layer in layers]
    if comparison:
        parts.append(_comparison(comparison))
    return "".join(parts)


def _layer_table(layer: dict) -> str:
    eff, learned = layer.get("effective"), layer.get("learned")
    head = ["head", ""] + [f"slot {k} (phase {p})" for k, p in enumerate(layer["slot_phase"])]
    rows = []
    for h in range(len(eff["mean"]) if eff else len(learned or [])):
        if eff:
            cells = [
                f"{m:.3f}" + interval((lo, hi), ".3f")
                for m, lo, hi in zip(eff["mean"][h], eff["ci_low"][h], eff["ci_high"][h], strict=True)
            ]
        else:
            cells = [NA] * len(layer["slot_phase"])
        rows.append([str(h), "effective [95%]", *cells])
        if learned is not None:
            rows.append([str(h), "learned", *(f"{v:.3f}" for v in learned[h])])
    caption = f"layer {layer['layer']} ({layer['pooler']}, s={layer['step']} w={layer['window']})"
    return _table(head, rows, caption)


def _comparison(comparison: dict) -> str:
    rho = number(comparison.get("rho"), ".2f", NA)
    p = number(comparison.get("p_value"), ".2g", NA)
    rows = [
        [str(ph), number(a, ".3f", NA), number(w, ".3f", NA)]
        for ph, a, w in zip(comparison["phases"], comparison["accuracy"], comparison["weight"], strict=True)
    ]
    line = f"Spearman rho (mean weight per phase vs accuracy per phase) = {rho} (p = {p}); {comparison.get('note', '')}"
    return f"<p>{html.escape(line)}</p>" + _table(["phase", "accuracy (run)", "mean effective weight"], rows)


# ---- theory.json -----------------------------------------------------------------------------


def theory_section(result: dict, figures: Path) -> str:
    from phasescope.theory.figures import FIGURES, write_figure

    cfg, main = result["config"], result["main"]
    lines = [
        f"s={cfg['step']} d={cfg['capacity']:g} noise={cfg['noise']:g}, {cfg.get('n_starts', '?')} starts "
        f"(seed {cfg.get('seed')})",
        f"broke symmetry in {_percent(main.get('broken_fraction'))} of starts; favourite offset counts "
        f"{main.get('top_offset_counts')}",
        f"critical capacity d* = {number(main.get('critical_capacity'), '.1f', NA)} (uniform pooling unstable below)",
        f"gap (best - worst offset quality) {number(main.get('gap_pp_mean'), '.1f', NA)} pp",
    ]
    rows = [_step_row(r) for r in result.get("by_step") or []]
    parts = ["<h2>Gradient-flow theory</h2>", _items(lines)]
    if rows:
        parts.append(_table(["step s", "gap (pp)", "broken", "strong offsets"], rows, "gap by step"))
    parts += [figure_tag(write_figure(result, name, figures)) for name in FIGURES]
    return "".join(parts)


def _step_row(r: dict) -> list[str]:
    sd = r.get("gap_pp_sd")
    gap = number(r.get("gap_pp_mean"), ".1f", NA) + ("" if sd is None else f" ± {sd:.1f}")
    return [str(r["step"]), gap, _percent(r.get("broken_fraction")), number(r.get("strong_offsets_mean"), ".2f", NA)]


SECTIONS: dict[str, tuple[str, str, Callable[[dict, Path], str]]] = {
    ABLATION: ("Head ablation", "phasescope ablate", ablation_section),
    PREFERENCES: ("Learned position preferences", "phasescope preferences", preferences_section),
    THEORY: ("Gradient-flow theory", "phasescope theory", theory_section),
}
