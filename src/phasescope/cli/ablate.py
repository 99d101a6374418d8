"""`phasescope ablate`: its options as one table (``ABLATE_OPTIONS``), the ablation matrix, what it prints."""

from __future__ import annotations

import typer

from phasescope.cli.app import command, console, say_path, with_options
from phasescope.cli.options import STEP
from phasescope.cli.results import report_hint
from phasescope.cli.sweep import declared_options_not_in, given_on_command_line, parse_offsets, read_declared
from phasescope.errors import InputError
from phasescope.probes import probe_forms
from phasescope.rundir import ABLATION
from phasescope.rundir.files import write_section

FEW_CONTENTS = 10  # below this many tested contents the held-out intervals are said to be wide
ABLATE_OPTIONS = {  # parameter: (type, typer option); panels group them in --help
    "model": (
        str,
        typer.Option(
            ...,
            "--model",
            metavar="SPEC",
            rich_help_panel="Model",
            help="Model to ablate: a phasescope model directory, hf:DIR (transformers, DeepSeek-V4 included) or a "
            "shipped model by name (demo:tiny-s4); the "
            "weights must load here (served openai: models cannot be ablated).",
        ),
    ),
    "probe": (
        str,
        typer.Option(
            "kv-retrieval",
            metavar="PROBE",
            rich_help_panel="Probe",
            help=f"Probe of the paired sweep: {', '.join(probe_forms())}; its options are sweep's.",
        ),
    ),
    "out": (
        str,
        typer.Option(
            None,
            metavar="DIR",
            rich_help_panel="Ablation",
            help="Directory for ablation.json (default: print only); a sweep run dir puts the section into its report.",
        ),
    ),
    "mode": (
        str,
        typer.Option(
            "zero",
            metavar="MODE",
            rich_help_panel="Ablation",
            help="How a head is removed: zero; mean (its mean over every token of the unablated sweep); resample "
            "(its output on another content at the same offset; needs prompts of one length per offset).",
        ),
    ),
    "layers": (
        str,
        typer.Option(
            None, metavar="LAYERS", rich_help_panel="Ablation", help="Layers to ablate, e.g. 0,1 (default: all)."
        ),
    ),
    "component": (
        str,
        typer.Option(
            "head",
            metavar="WHAT",
            rich_help_panel="Ablation",
            help="What is removed: head (a query head's output) or kv-entries (a KV head's compressed entries).",
        ),
    ),
    "top_k": (
        int,
        typer.Option(
            1,
            min=1,
            metavar="K",
            rich_help_panel="Ablation",
            help="Heads per phase removed together in the held-out causal check.",
        ),
    ),
    "offsets": (
        str,
        typer.Option(
            "0:8",
            metavar="D",
            rich_help_panel="Geometry",
            help="Offsets d of the paired sweep: start:stop or a comma list (two periods or more).",
        ),
    ),
    "samples": (
        int,
        typer.Option(
            20,
            min=1,
            metavar="N",
            rich_help_panel="Probe",
            help="Content samples, each at every offset (half choose, half test).",
        ),
    ),
    "seed": (
        int,
        typer.Option(
            0,
            metavar="SEED",
            rich_help_panel="Ablation",
            help="Seed of the contents, the half split and the permutations.",
        ),
    ),
    "permutations": (
        int,
        typer.Option(
            300, min=50, metavar="N", rich_help_panel="Ablation", help="Within-content permutations per head."
        ),
    ),
    "step": STEP,
    "local": (
        int,
        typer.Option(
            None,
            min=0,
            metavar="L",
            rich_help_panel="Geometry",
            help="Raw local window L (default: the model's config).",
        ),
    ),
}
ABLATE_OPTIONS |= declared_options_not_in(ABLATE_OPTIONS)  # every probe's and backend's, as sweep has them


@command()
@with_options(ABLATE_OPTIONS)
def ablate(ctx, **given) -> None:
    """Remove each attention head in turn and rerun the same paired sweep: accuracy and log-prob change
    per phase, a specialization index per head with a Holm-corrected p, and the held-out causal check
    of the top-k heads per phase (docs/ablation.md)."""
    from phasescope.inspect.ablation import ablation_matrix
    from phasescope.rundir.owner import claim_out

    claim_out(given["out"], "phasescope ablate", may_hold=("sweep",))  # before the ablations, not after
    result = ablation_matrix(**ablation_arguments(given, given_on_command_line(ctx, given)), progress=True)
    print_ablation(result)
    if given["out"]:
        write_section(given["out"], ABLATION, result)
        say_path(f"wrote {given['out']}/ablation.json")
        report_hint(given["out"])


def ablation_arguments(o: dict, typed: set[str]) -> dict:
    """ablation_matrix's arguments from the command line's values (mode and layers checked here);
    ``typed``: the options the user typed (a probe's option is passed only then, as sweep passes it:
    one the probe does not read is refused)."""
    from phasescope.inspect.heads import MODES

    if o["mode"] not in MODES:
        raise InputError(f"--mode {o['mode']!r} is invalid; allowed: {' | '.join(MODES)}")
    try:
        layers = None if o["layers"] is None else [int(v) for v in o["layers"].split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--layers {o['layers']!r}: use layer numbers separated by commas, e.g. 0,1") from None
    if layers == []:
        raise InputError(
            f"--layers {o['layers']!r} names no layer; give layer numbers, e.g. 0,1, or leave it out for all"
        )
    spec = _typed_sweep(o, typed)
    same = ("samples", "mode", "seed", "top_k", "component", "step", "local")
    chosen = {name: getattr(spec.probe.options, name) for name in typed if hasattr(spec.probe.options, name)}
    return (
        {
            "model": o["model"],
            "probe": o["probe"],
            "offsets": parse_offsets(o["offsets"]),
            "layers": layers,
            "n_permutations": o["permutations"],
            "options": spec.backend,
        }
        | {name: o[name] for name in same}
        | chosen
    )


def _typed_sweep(o: dict, typed: set[str]):
    """The probe's and the model's options read as `phasescope sweep` reads them (run.settings): an
    option another probe or backend owns is refused when typed, whatever its value."""
    from phasescope.run.settings import option_sections, sweep_settings

    owned = {name for name, section in option_sections().items() if section in ("probe", "backend")}
    given = read_declared({name: o[name] for name in owned if name in o})
    spec, _ = sweep_settings(o["model"], explicit=typed & owned, **given)
    return spec


def print_ablation(result: dict) -> None:
    console.print(
        "baseline accuracy by phase: "
        + "  ".join(f"{b['phase']}:{b['accuracy']:.0%}" for b in result["baseline"] if b["accuracy"] is not None)
    )
    for row in result["heads"]:
        acc = row["accuracy"]
        p = "n/a" if acc["p_holm"] is None else f"{acc['p_holm']:.3f}"
        index = "n/a" if acc["index"] is None else f"{acc['index']:.2f}"
        console.print(
            f"layer {row['layer']} {'KV head' if result.get('component') == 'kv-entries' else 'head'} {row['head']}: "
            f"specialization index {index} "
            f"(preferred phase {acc['preferred_phase']}), Holm p {p}" + ("  SPECIALIZED" if acc["specialized"] else ""),
            highlight=False,
        )
    if not result["causal"]:
        console.print(
            f"held-out causal check: not run -- it chooses heads on half of the contents and tests them on the other "
            f"half, each needs 2 or more ({result.get('samples', 'too few')} contents given; raise --samples)",
            highlight=False,
        )
    for c in result["causal"]:
        heads = ", ".join(f"L{layer}H{head}" for layer, head in c["heads"])
        ci = "" if c["ci_low"] is None else f" [{100 * c['ci_low']:+.1f}, {100 * c['ci_high']:+.1f}]"
        p = "" if c["p_value"] is None else f", p {c['p_value']:.3g} (Holm over phases {c['p_holm']:.3g})"
        contrast = "not estimable" if c["contrast"] is None else f"{100 * c['contrast']:+.1f} pp"
        console.print(
            f"phase {c['phase']}: removing {heads} (chosen on {c['chosen_on']} contents) - held-out contrast "
            f"{contrast}{ci}{p} over {c['n_contents']} other contents",
            highlight=False,
        )
    tested = min((c["n_contents"] for c in result["causal"]), default=None)
    if tested is not None and tested < FEW_CONTENTS:
        console.print(
            f"note: the held-out check tests on {tested} contents: its intervals are wide (a t interval over "
            f"{tested} values; clipped to the range a contrast can take); raise --samples for a usable one",
            highlight=False,
        )
