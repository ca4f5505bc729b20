"""``simeval run ... --engines FILE`` (or ``--engine URL --model M``): the engine options of
``simeval run``, and the run and its printout when one is given (``simeval.runs.engine_run``
does the work)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape

from simeval.cli.common import UserError, console, print_json, progress_bar
from simeval.cli.worst import print_worst
from simeval.errors import InvalidInput

if TYPE_CHECKING:
    from simeval.runs.engine_run import EngineComparison, EngineRunSummary
    from simeval.runs.engines import EngineSpec
    from simeval.runs.run import RunRequest

ENGINE_OPTIONS = (
    "engines_file",
    "engine_url",
    "model",
    "api_key_env",
    "system",
    "template",
    "temperature",
    "param",
    "concurrency",
    "repeat",
    "cache_path",
    "no_cache",
)


def engine_options(func: Callable[..., object]) -> Callable[..., object]:
    """The engine flags of ``simeval run``; the command receives them as ``engine_args`` (a
    dict, with ``engines_file`` or ``engine_url`` set when an engine is to answer)."""

    @click.option(
        "--engines",
        "engines_file",
        default=None,
        metavar="FILE",
        help="Engines that answer every case first (YAML: engines: a list of url+model, cmd "
        "or python entries); each engine's answers are scored, stored with --store, compared "
        "with the first engine's and gated.",
    )
    @click.option(
        "--engine",
        "engine_url",
        default=None,
        metavar="URL",
        help="One OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1) that answers "
        "every case; with --model.",
    )
    @click.option("--model", default=None, help="The model for --engine.")
    @click.option(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="Environment variable holding --engine's API key (never stored or logged).",
    )
    @click.option("--system", default=None, help="System prompt for --engine.")
    @click.option(
        "--template",
        default=None,
        help="Prompt template for --engine, with {input} where the case's input goes.",
    )
    @click.option("--temperature", type=float, default=None, help="Temperature for --engine.")
    @click.option(
        "--param",
        multiple=True,
        metavar="NAME=JSON",
        help="Another request parameter for --engine, e.g. max_tokens=200 (repeatable).",
    )
    @click.option(
        "--concurrency",
        type=click.IntRange(1, 1024),
        default=None,
        metavar="N",
        help="Cases in flight per engine (default: the engine's, else 8 for HTTP, 1 for a "
        "command or a callable).",
    )
    @click.option(
        "--repeat",
        type=click.IntRange(1, 100),
        default=1,
        show_default=True,
        metavar="K",
        help="Answer each case K times; the summary gives the spread over the repeats.",
    )
    @click.option(
        "--cache",
        "cache_path",
        default=None,
        metavar="PATH",
        help="The engines' response cache (SQLite; default: engine-cache.sqlite3 in the "
        "user's cache directory): a rerun asks only for what changed.",
    )
    @click.option("--no-cache", is_flag=True, help="Ask the engines again for every case.")
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> object:
        kwargs["engine_args"] = {n: kwargs.pop(n) for n in ENGINE_OPTIONS}
        return func(*args, **kwargs)

    return wrapper


_FLAGS = {
    "engines_file": "--engines",
    "engine_url": "--engine",
    "cache_path": "--cache",
}
_DEFAULTS: dict[str, object] = {"repeat": 1, "no_cache": False, "param": ()}


def wants_engines(args: dict[str, Any]) -> bool:
    """Whether an engine is to answer the cases (else its flags must be left out)."""
    if args["engines_file"] or args["engine_url"]:
        return True
    for name in ENGINE_OPTIONS:
        if args[name] != _DEFAULTS.get(name):
            flag = _FLAGS.get(name, "--" + name.replace("_", "-"))
            raise UserError(f"{flag} needs --engines FILE or --engine URL --model M")
    return False


def _params(items: tuple[str, ...], temperature: float | None) -> dict[str, object]:
    out: dict[str, object] = {}
    for item in items:
        name, eq, text = item.partition("=")
        if not eq or not name.strip():
            raise UserError(f"--param {item!r}: give NAME=VALUE, e.g. max_tokens=200")
        try:
            out[name.strip()] = json.loads(text)
        except ValueError:
            out[name.strip()] = text  # a bare word is a string
    if temperature is not None:
        out["temperature"] = temperature
    return out


def engine_specs(args: dict[str, Any]) -> list[EngineSpec]:
    """The engines the flags declare (a file's, or the one of ``--engine``)."""
    from simeval.runs.engines import command_line_engine, load_engines

    single = ("model", "api_key_env", "system", "template", "temperature", "param")
    if args["engines_file"] and args["engine_url"]:
        raise UserError("give --engines FILE or --engine URL, not both")
    if args["engines_file"]:
        given = [n for n in single if args[n] not in (None, ())]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise UserError(f"{flag} is for --engine; with --engines, set it in the file")
        return load_engines(args["engines_file"])
    return [
        command_line_engine(
            args["engine_url"],
            args["model"],
            args["api_key_env"],
            args["system"],
            args["template"],
            _params(args["param"], args["temperature"]),
        )
    ]


def run_with_engines(
    request: RunRequest, args: dict[str, Any], as_json: bool, say: Callable[[str], None]
) -> None:
    """Run the engines on ``request``'s input, print the summaries, exit 0 or 1."""
    from simeval.runs.engine_run import EngineRunRequest, run_engines

    if request.baseline is not None:
        raise UserError(
            "with engines, each engine is compared with the first: leave out --baseline"
        )
    try:
        specs = engine_specs(args)
    except InvalidInput as exc:
        raise UserError(str(exc)) from None
    engine_request = EngineRunRequest(
        run=request,
        engines=specs,
        concurrency=args["concurrency"],
        repeat=args["repeat"],
        cache=args["cache_path"],
        use_cache=not args["no_cache"],
        references_given=request.columns.references != ("reference",),
    )
    summary = run_engines(engine_request, lambda label: progress_bar(label))
    if as_json:
        print_json(summary.to_dict())
    else:
        print_engine_runs(summary, say)
    raise SystemExit(0 if summary.ok else 1)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def print_engine_runs(summary: EngineRunSummary, say: Callable[[str], None]) -> None:
    """The human summary: a few lines per engine, then the verdict."""
    head = f"{len(summary.results)} engine(s) on {escape(summary.source)}"
    if summary.dataset_name is not None:
        head += f" (data set {escape(summary.dataset_name)}, version {summary.dataset_version})"
    say(head)
    for r in summary.results:
        s, st = r.summary, r.stats
        say(f"[bold]engine {escape(r.spec.name)}[/bold]")
        lat = st.latency_ms(0.5)
        parts = [
            f"{st.cases:,} answers ({st.cached:,} from the cache, {st.errors:,} errors)",
            f"{st.calls:,} calls",
        ]
        if lat is not None:
            parts.append(f"latency p50 {lat:.0f} ms, p95 {st.latency_ms(0.95):.0f} ms")
        if st.prompt_tokens or st.completion_tokens:
            parts.append(f"tokens {st.prompt_tokens:,} in, {st.completion_tokens:,} out")
        if st.cost is not None:
            parts.append(f"cost {st.cost:.4g}")
        say("  " + ", ".join(parts))
        say(
            f"  pass rate [bold]{_pct(s.pass_rate)}[/bold] ({s.passed:,} of {s.results:,}), "
            f"mean score {'-' if s.mean_score is None else f'{s.mean_score:.4f}'}"
        )
        if r.spread is not None:
            pr = r.spread["pass_rate"]
            say(
                f"  over {r.spread['repeats']} repeats: pass rate {_pct(pr['mean'])} "
                f"± {_pct(pr['stdev'])} (from {_pct(pr['min'])} to {_pct(pr['max'])})"
            )
        if s.unmatched_rows:
            named = ", ".join(u.where for u in (s.unmatched or [])[:5])
            more = s.unmatched_rows - min(5, len(s.unmatched or ()))
            say(
                f"  [yellow]{s.unmatched_rows:,} rows matched no eval: {escape(named)}"
                + (f" and {more:,} more" if more > 0 else "")
                + "[/yellow]"
            )
        print_worst(s, f"worst cases of {r.spec.name}")
        for where, error in s.skipped_rows[:5]:
            say(f"  [yellow]{escape(where)}: {escape(error)}[/yellow]")
        if s.skipped > 5:
            say(f"  [yellow]... and {s.skipped - 5:,} more case errors[/yellow]")
        if r.error is not None:
            say(f"  [red]{escape(r.error)}[/red]")
        if r.comparison is not None:
            _print_comparison(r.comparison, r.worse, summary.results[0].spec.name, say)
        if s.results_file:
            say(f"  results: {escape(s.results_file)}")
        if s.junit_file:
            say(f"  junit: {escape(s.junit_file)}")
        if s.run_id is not None:
            say(f"  stored as run {s.run_id} ({escape(s.run_name or '')})")
        for g in s.gates or ():
            ok = "[green]ok[/green]" if g.passed else "[red]FAILED[/red]"
            say(f"  gate {g.gate} {g.limit}: {ok} (value {g.value:.4g})")
    if any(r.run_id is not None for r in (x.summary for x in summary.results)):
        say(f"group: {escape(summary.group)}")
    say("[green]ok[/green]" if summary.ok else "[red]FAILED[/red]")
    console.file.flush()


def _print_comparison(
    comparison: EngineComparison, worse: bool, first: str, say: Callable[[str], None]
) -> None:
    """The verdict against the first engine, and each eval's differences."""
    mark = "[red]WORSE[/red]" if worse else escape(comparison["verdict"])
    say(f"  against {escape(first)}: {mark}")
    for e in comparison["evals"]:
        if e.get("score_diff") is None:
            continue
        name = "all cases" if e["eval"] == "(no eval)" else e["eval"]
        lo, hi = e["score_ci"]
        plo, phi = (100 * x for x in e["pass_rate_ci"])
        line = (
            f"    {escape(name)}: mean score {e['score_diff']:+.4f} [{lo:+.4f}, {hi:+.4f}], "
            f"pass rate {100 * e['pass_rate_diff']:+.1f} points [{plo:+.1f}, {phi:+.1f}]"
        )
        if e.get("mcnemar_p") is not None:
            line += f", McNemar p {e['mcnemar_p']:.3g}"
        say(line + f" ({e['pairs']} pairs): {escape(e['verdict'])}")
