"""The application, its console and its one exception boundary (``command``): every command module
registers through ``command()``."""

from __future__ import annotations

import errno
import functools
import inspect
import os
import warnings

import typer
from rich.console import Console
from rich.markup import escape
from typer import rich_utils

from phasescope.errors import InputError


class _PlainHelp:
    """``--help`` shown as the plain flag it is: typer labels it ``<bool>``, as if it took a value."""

    def get_help_option(self, ctx):
        option = super().get_help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option


class Command(_PlainHelp, typer.core.TyperCommand):
    pass


# `phasescope --help`: the commands grouped and in the order of a study (a new command gets a place)
WORKFLOW = {
    "Start here": ("demo",),
    "Measure a model": ("sweep", "merge", "analyze", "report", "compare", "export"),
    "Check a serving stack": ("check", "replay"),
    "Look inside a model": ("ablate", "preferences"),
    "Train, reproduce, theory": ("train", "reproduce", "theory"),
    "Reference": ("backends", "recipes", "schemes", "savings", "cache-demo"),
}
ORDER = [name for names in WORKFLOW.values() for name in names]
PANEL = {name: panel for panel, names in WORKFLOW.items() for name in names}


class Group(_PlainHelp, typer.core.TyperGroup):
    def list_commands(self, ctx) -> list[str]:
        return sorted(super().list_commands(ctx), key=lambda n: ORDER.index(n) if n in ORDER else len(ORDER))


app = typer.Typer(
    help="phasescope: find and measure phase sensitivity in models with chunked KV-cache compression.",
    no_args_is_help=True,
    add_completion=False,
    cls=Group,
)
MIN_COLUMNS = 20  # below this (COLUMNS=0, a typo) rich would print nothing or one word per line


def _console() -> Console:
    """rich's console; a COLUMNS it cannot use is replaced by the usual 80 columns."""
    columns = os.environ.get("COLUMNS")
    usable = columns is None or (columns.strip().isdigit() and int(columns) >= MIN_COLUMNS)
    return Console() if usable else Console(width=80)


console = _console()
DEBUG = {"on": False}  # set by --debug before any command runs


def _print_version(asked: bool) -> None:
    if asked:
        from phasescope.version import __version__

        console.print(f"phasescope {__version__}")
        raise typer.Exit()


@app.callback()
def options(
    debug: bool = typer.Option(False, "--debug", metavar="", help="On any error, show the full Python traceback."),
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        metavar="",
        help="Print phasescope's version and exit.",
    ),
) -> None:
    """phasescope: find and measure phase sensitivity in models with chunked KV-cache compression."""
    DEBUG["on"] = debug
    warnings.showwarning = _show_warning


_LIBRARY_WARNING = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """phasescope's own warnings as one plain line; other libraries' in their usual form."""
    if "phasescope" in str(filename) and issubclass(category, UserWarning):
        console.print(f"[yellow]warning:[/] {message}", highlight=False)
    else:
        _LIBRARY_WARNING(message, category, filename, lineno, file, line)


def _one_line_parser_error(err) -> None:
    """Parser errors (a bad option value, a missing option) as the one ``error: ...`` line every other
    error gets, with where to look, instead of typer's multi-line box."""
    if err.__class__.__name__ == "NoArgsIsHelpError":  # `phasescope` alone: the help was shown
        return
    ctx = getattr(err, "ctx", None)
    command = " ".join(["phasescope", *ctx.command_path.split()[1:]]) if ctx is not None else "phasescope"
    where = f" (see `{command} --help`)"
    console.print(f"[bold red]error:[/] {escape(err.format_message())}{where}", highlight=False)


rich_utils.rich_format_error = _one_line_parser_error  # typer calls it for every click usage error


def say_path(line: str) -> None:
    """A line that names a file or directory, never wrapped: rich would break a long path mid-name
    (``.../run/met`` ``rics.json``), which no longer copies and pastes."""
    console.print(line, highlight=False, soft_wrap=True, markup=False)


def fail(message: str) -> None:
    """Print a user-facing error and exit with status 2 (no traceback)."""
    # piped into a log an error stays one line (rich would wrap it at 80 columns mid-sentence)
    console.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=not console.is_terminal)
    raise typer.Exit(code=2)


ELSEWHERE = "choose another --out"
# a command without --out writes into the run directory it was given (analyze, report, export ...)
COPY_ELSEWHERE = "copy the run directory somewhere writable (cp -r RUN COPY) and run the command on the copy"


ENVIRONMENT_FIXES = {  # what to do about a file-system error phasescope did not cause
    errno.ENOSPC: "free space on that disk and rerun the same command: finished work is kept and resumes",
    errno.EDQUOT: "your disk quota is full: free space and rerun the same command; finished work is kept",
    errno.EACCES: f"you may not write or read there: fix its permissions or {ELSEWHERE}",
    errno.EPERM: f"the operation is not permitted there: fix its permissions or {ELSEWHERE}",
    errno.EROFS: f"that file system is read-only: {ELSEWHERE}",
}


def _os_message(err: OSError, has_out: bool = True) -> str:
    where = f": {err.filename}" if err.filename else ""
    fix = ENVIRONMENT_FIXES.get(err.errno)
    if fix and not has_out:
        fix = fix.replace(ELSEWHERE, COPY_ELSEWHERE)
    return f"{err.strerror or err}{where}" + (f" ({fix})" if fix else "")


def guarded(command):
    """The one exception boundary: a user's mistake (InputError, a file-system error) becomes
    ``error: ...`` with exit 2; an interruption keeps finished work; anything else is a bug in
    phasescope, reported as such (``--debug`` shows its traceback)."""

    @functools.wraps(command)
    def run(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.BadParameter):
            raise
        except KeyboardInterrupt as err:  # a command that knows more says it in the interrupt's message
            what = err.args[0] if err.args else "finished work is on disk; rerun the same command to continue"
            console.print(f"interrupted: {what}", highlight=False)
            raise typer.Exit(code=130) from None
        except (InputError, OSError) as err:
            if DEBUG["on"]:
                raise
            has_out = "out" in inspect.signature(command).parameters
            fail(_os_message(err, has_out) if isinstance(err, OSError) else str(err))
        except Exception as err:
            if DEBUG["on"]:
                raise
            console.print(
                f"[bold red]internal error[/] (a bug in phasescope, not in your input): {type(err).__name__}: {err}\n"
                "rerun with --debug (phasescope --debug COMMAND ...) for the traceback, and please report it",
                highlight=False,
            )
            raise typer.Exit(code=2) from None  # 1 is a gate's "B departs" (compare --paired, check)

    return run


def command(*args, **kwargs):
    """``app.command`` behind the exception boundary, in its ``WORKFLOW`` panel; its help is the
    docstring with each paragraph on one line (rich wraps it to the terminal, rather than keeping
    the source's line breaks)."""

    def register(fn):
        name = args[0] if args else kwargs.get("name") or fn.__name__.replace("_", "-")
        kwargs.setdefault("rich_help_panel", PANEL.get(name))
        kwargs.setdefault("help", paragraphs(fn.__doc__ or ""))
        return app.command(*args, cls=Command, **kwargs)(guarded(fn))

    return register


def paragraphs(text: str) -> str:
    """``text`` with the line breaks inside each paragraph (blank-line separated) removed."""
    return "\n\n".join(" ".join(block.split()) for block in inspect.cleandoc(text).split("\n\n"))


def _show_every_option(ctx: typer.Context, value: bool) -> None:
    """``--help-all``: the command's help with the options the plain ``--help`` leaves out."""
    if not value or ctx.resilient_parsing:
        return
    for param in ctx.command.params:
        param.hidden = False
    typer.echo(ctx.get_help(), nl=False)
    raise typer.Exit()


HELP_ALL = (
    bool,
    typer.Option(
        False,
        "--help-all",
        metavar="",
        is_eager=True,
        expose_value=False,  # kept out of click's ctx.params, which the reproducing command reads back
        callback=_show_every_option,
        help="Show every option; --help shows the common ones.",
    ),
)


def _hidden(option, hidden: bool):
    """A copy of ``option`` with ``hidden`` set: other commands share the table's option objects."""
    import copy

    option = copy.copy(option)
    option.hidden = hidden
    return option


def with_options(table: dict[str, tuple[type, object]], common: tuple[str, ...] | None = None):
    """Give ``fn(**given)`` the signature typer reads from a table of options, one keyword
    parameter per row (name: (type, typer.Option(...))), so a command with many options is one
    table and a short body. ``common``: the options ``--help`` shows; the rest are one flag away
    (``--help-all``), so the common ones fit a screen."""
    if common is not None:
        unknown = set(common) - set(table)
        assert not unknown, f"common options not in the table: {sorted(unknown)}"
        table = {name: (kind, _hidden(option, name not in common)) for name, (kind, option) in table.items()}
        table |= {"help_all": HELP_ALL}

    def wrap(body):
        keyword = inspect.Parameter.KEYWORD_ONLY
        # fn(ctx, **given): typer passes its context (which options the user typed)
        wants_ctx = "ctx" in inspect.signature(body).parameters

        @functools.wraps(body)
        def fn(*args, help_all: bool = False, **given):  # --help-all acts in its callback; the body never sees it
            return body(*args, **given)

        context = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)]
        fn.__signature__ = inspect.Signature(
            (context if wants_ctx else [])
            + [
                inspect.Parameter(name, keyword, default=option, annotation=kind)
                for name, (kind, option) in table.items()
            ]
        )
        annotations = {name: kind for name, (kind, _) in table.items()} | {"return": None}
        fn.__annotations__ = ({"ctx": typer.Context} if wants_ctx else {}) | annotations
        return fn

    return wrap
