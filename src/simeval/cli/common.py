"""What every CLI command shares: the error contract, the ``--db``, ``--json`` and scorer option
flags, the service a command opens, JSON output, and how results and explanations print."""

from __future__ import annotations

import contextlib
import functools
import getpass
import json
import os
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar, overload

import click
from rich.console import Console, ConsoleDimensions
from rich.markup import escape

from simeval.errors import InvalidInput, SimevalError
from simeval.scoring.options import OPTION_NAMES, SCALES

if TYPE_CHECKING:  # the service (SQLAlchemy, pydantic) loads when a command opens it
    from pydantic import BaseModel

    from simeval.service import Service

_F = TypeVar("_F", bound=Callable[..., object])


class _Console(Console):
    """A console that does not wrap or cut lines when its output is not a terminal: piped
    into a file or ``cat``, rich would otherwise lay tables out for 80 columns, cutting names
    to "refund-p…" and breaking a suggested command in two."""

    @property
    def size(self) -> ConsoleDimensions:
        real = super().size
        if not self.is_terminal and "COLUMNS" not in os.environ:
            return ConsoleDimensions(10_000, real.height)
        return real

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        Console.size.fset(self, new_size)  # type: ignore[attr-defined]


console = _Console(highlight=False)
err_console = _Console(stderr=True, highlight=False)


ERROR_CHARS = 300  # an error line is cut here (a value it quotes may be huge)


def one_line(message: str, limit: int = ERROR_CHARS) -> str:
    """``message`` on one line, at most ``limit`` characters (an ellipsis where it is cut).

    >>> one_line("bad value: " + "x" * 400)[-12:], len(one_line("y" * 400))
    ('xxxxxxxxxxx…', 300)
    """
    text = " ".join(message.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class UserError(click.ClickException):
    """A user mistake: one line on stderr, exit code 2 (never a traceback)."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {one_line(self.format_message())}", err=True)


class Group(click.Group):
    """A command group that turns SimevalError (and bad files) into exit 2 with one line."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, cmd, rest = super().resolve_command(ctx, args)
        # ``simeval --json COMMAND``: a command with no JSON to print says so, rather than
        # printing text to a caller waiting for JSON
        wants_json = ctx.find_root().params.get(ROOT_JSON)
        params = () if cmd is None or isinstance(cmd, click.Group) else cmd.params
        if wants_json and params and not any(p.name == "as_json" for p in params):
            raise UserError(f"--json: `{ctx.command_path} {name}` has no JSON output")
        return name, cmd, rest

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SimevalError as exc:
            raise UserError(str(exc)) from None
        except sqlite3.DatabaseError as exc:
            raise _database_error(exc) from None
        except (OSError, UnicodeDecodeError) as exc:
            if isinstance(exc, BrokenPipeError):
                sys.exit(0)
            raise UserError(str(exc)) from None
        except Exception as exc:
            if _is_driver_error(exc):
                raise _database_error(exc) from None
            raise


def _is_driver_error(exc: Exception) -> bool:
    """Whether ``exc`` is a database driver's error. Only the commands that open a store load
    it, and the others do not pay for loading it here."""
    if "simeval.store.connection" not in sys.modules:
        return False
    from simeval.service.store_names import DRIVER_ERRORS

    return isinstance(exc, DRIVER_ERRORS)


def _database_error(exc: Exception) -> Exception:
    """One line for an error of the database file itself (damaged, read-only), else ``exc``."""
    from simeval.service.store_names import database_problem

    problem = database_problem(exc)
    return exc if problem is None else UserError(f"the database {problem}")


def scorer_options(func: Callable[..., object]) -> Callable[..., object]:
    """Flags for the scorer options; the command receives them as ``options`` (a dict)."""

    @click.option("--language", default=None, help="Stemmer and word list, e.g. english, de.")
    @click.option("--stemming/--no-stemming", default=None, help="Snowball stemming.")
    @click.option("--prefix", type=int, default=None, help="Keep N characters of each term.")
    @click.option("--stop-words", type=int, default=None, help="Drop the N commonest words.")
    @click.option("--ngram", type=int, default=None, help="Largest word n-gram (1-3).")
    @click.option("--sublinear-tf/--raw-tf", default=None, help="tf = 1 + ln(count).")
    @click.option("--idf", default=None, help="background (default), pair, or a corpus table file.")
    @click.option("--tokenizer", default=None, help="unicode (default) or words (the previous).")
    @click.option(
        "--input-weight", type=float, default=None, help="Weight of the question's terms (0-1)."
    )
    @click.option(
        "--negation", type=float, default=None, help="Factor when one text negates (1 = off)."
    )
    @click.option(
        "--scale",
        type=click.Choice(SCALES),
        default=None,
        help="bands (default: calibrated to the strictness bands), bands-1 (0.1.0's) or cosine.",
    )
    @click.option(
        "--answer/--no-answer",
        default=None,
        help="With the question known, score the share of the reference the output holds.",
    )
    @click.option(
        "--contradiction/--no-contradiction",
        default=None,
        help="Veto negated, other-number/date/name and refusal pairs below 0.70.",
    )
    @click.option(
        "--require",
        "required",
        multiple=True,
        metavar="TERM",
        help="A term the output must contain to pass (repeatable).",
    )
    @click.option(
        "--synonyms",
        multiple=True,
        metavar="WORDS",
        help="A group of words counted as one term, e.g. begin,commence,start (repeatable).",
    )
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> object:
        options = {n: kwargs.pop(n) for n in OPTION_NAMES}
        for name in ("required", "synonyms"):  # multiple: () when not given
            options[name] = list(options[name]) or None
        kwargs["options"] = {k: v for k, v in options.items() if v is not None}
        return func(*args, **kwargs)

    return wrapper


DB_HELP = "SQLite file or database URL{} (default: SIMEVAL_DATABASE_URL, else the per-user file)."


ROOT_DB = "simeval.db"  # where ``simeval --db X COMMAND`` keeps X for the command
ROOT_JSON = "root_json"  # the root's parameter of ``simeval --json COMMAND``


def _db_before(ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """A command's ``--db``, else the one given before the command (``simeval --db X ...``)."""
    if value is not None:
        return value
    root: str | None = ctx.find_root().meta.get(ROOT_DB)
    return root


@overload
def db_option(func: _F) -> _F: ...
@overload
def db_option(*, purpose: str = "") -> Callable[[_F], _F]: ...
def db_option(func: _F | None = None, *, purpose: str = "") -> _F | Callable[[_F], _F]:
    """The ``--db PATH|URL`` flag of every command that opens a database, as ``db``:
    ``@db_option``, or ``@db_option(purpose="for --store")`` to say what it is for."""
    option = click.option(
        "--db",
        default=None,
        metavar="PATH|URL",
        callback=_db_before,
        help=DB_HELP.format(f" {purpose}" if purpose else ""),
    )
    return option if func is None else option(func)


def _json_before(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
    """A command's ``--json``, or the one given before the command (``simeval --json ...``)."""
    return bool(value or ctx.find_root().params.get(ROOT_JSON))


def json_flag(help: str = "Print the data as JSON.") -> Callable[[_F], _F]:
    """The ``--json`` flag of every command that can print JSON, as ``as_json``; it may also
    come before the command (``simeval --json evals list``)."""
    return click.option("--json", "as_json", is_flag=True, callback=_json_before, help=help)


json_option = json_flag()


@contextlib.contextmanager
def service_at(db: str | None) -> Iterator[Service]:
    """The service of the database ``--db`` names, closed when the command is done."""
    from simeval.service import Service
    from simeval.service.actor import acting_as

    svc = Service(db)
    try:
        with acting_as(cli_actor()):
            yield svc
    finally:
        svc.close()


def cli_actor() -> str:
    """Who the audit log names for a change made with the CLI: ``cli:`` and the account."""
    try:
        account = getpass.getuser()
    except (OSError, KeyError):  # no login name in this environment
        return "cli"
    return f"cli:{account}"[:64]


def print_json(data: object) -> None:
    """Data as indented JSON on stdout (the ``--json`` form of every command)."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def dump(model: BaseModel) -> dict[str, Any]:
    """A service answer (a pydantic model) as JSON-ready data."""
    return model.model_dump(mode="json")


def verdict(passed: bool) -> str:
    """PASS or FAIL, coloured."""
    return "[green]PASS[/green]" if passed else "[red]FAIL[/red]"


def percent(value: float | None) -> str:
    """A rate as ``12.3%``, ``-`` for none."""
    return "-" if value is None else f"{100 * value:.1f}%"


def decimal(value: float | None) -> str:
    """A score as ``0.123``, ``-`` for none."""
    return "-" if value is None else f"{value:.3f}"


def short(text: str | None, width: int = 60) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def print_explanation(exp: dict[str, Any] | None) -> None:
    """Why a result scored as it did: the reason, the matched, missing and extra terms."""
    if not exp:
        return
    if exp.get("reason"):
        console.print(f"reason: {escape(exp['reason'])}")
    for title, key in (
        ("matched", "shared"),
        ("missing from output", "missing"),
        ("not in reference", "extra"),
    ):
        terms = exp.get(key) or []
        if terms:
            text = ", ".join(f"{t['term']} ({t['weight']:.3f})" for t in terms)
            console.print(f"{title}: {escape(text)}")
    if exp.get("note"):
        console.print(f"note: {escape(exp['note'])}")
    if exp.get("missing_required"):
        # the eval's required terms: missing one fails the result whatever its score
        console.print(f"fails: required term missing: {escape(', '.join(exp['missing_required']))}")


def output_format(
    path: str | None, given: str | None, choices: tuple[str, ...], default: str
) -> str:
    """The format a command writes: ``--format`` when given, else the file's suffix (none:
    ``default``). A suffix of another format is refused (exit 2): ``out.xlsx`` would
    otherwise get CSV under a name that promises a spreadsheet."""
    if given:
        return given
    if path and path != "-":
        suffix = Path(path).suffix.lower().lstrip(".")
        if suffix == "yml":
            suffix = "yaml"
        if suffix in choices:
            return suffix
        if suffix:
            names = ", ".join("." + c for c in choices)
            raise UserError(
                f"unsupported format .{suffix} for {path}: write {names}, or give --format"
            )
    return default


@contextlib.contextmanager
def output_file(path: str | None) -> Iterator[TextIO]:
    """Stdout, or a file written whole or not at all (a temporary file renamed at the end)."""
    if path is None or path == "-":
        yield sys.stdout
        return
    target = Path(path)
    if target.is_dir():
        raise InvalidInput(f"output path {path} is a directory")
    tmp = target.with_name(target.name + ".partial")
    try:
        with tmp.open("w", encoding="utf-8", newline="") as fh:
            yield fh
        tmp.replace(target)
    finally:
        tmp.unlink(missing_ok=True)


def read_input(value: str | None, path: str | None, what: str) -> str | None:
    """Text from an argument, a file, or stdin (``-`` for either)."""
    from simeval.checks import read_text_file

    if value is not None and path is not None:
        raise UserError(f"give the {what} as an argument or with --{what}-file, not both")
    if path is not None:
        if path == "-":
            return sys.stdin.read()
        return read_text_file(path, what)
    if value == "-":
        return sys.stdin.read()
    return value


@contextlib.contextmanager
def progress_bar(
    label: str, counts: bool = False
) -> Iterator[Callable[[int, int | None], None] | None]:
    """``update(done, total)`` for a progress bar on stderr when it is a terminal; None in
    pipes, CI logs and tests. ``counts``: show "done/total" (rows) rather than a percentage
    (bytes).

    The bar is redrawn by ``update`` itself, at most ten times a second, never by a refresh
    thread: ``simeval run`` forks its process pool while the bar is shown.
    """
    if not err_console.is_terminal:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TimeRemainingColumn,
    )

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        MofNCompleteColumn() if counts else TaskProgressColumn(),
        TimeRemainingColumn(),
        console=err_console,
        auto_refresh=False,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None)
        last = 0.0

        def update(done: int, total: int | None) -> None:
            nonlocal last
            bar.update(task, completed=done, total=total)
            now = time.monotonic()
            if now - last >= 0.1 or (total is not None and done >= total):
                last = now
                bar.refresh()

        yield update
