"""Compare two sides (A and B) of stored or filed results: ``Service.compare``.

A side is written as text, the same in the CLI, the API and the studio:

- ``run:ID`` — a data-set run stored with ``--store``; ``run:latest`` — the newest stored run;
- ``captures`` or ``captures:KEY=VALUE,...`` — captured results; ``eval=NAME``, ``since=7d``
  and ``until=...`` select the eval and the time window, any other ``KEY=VALUE`` is a capture
  metadata filter (``captures:engine=v2,since=7d``);
- a results file written by ``simeval run --output`` (the CLI only: the server does not read
  files named by a request).

Captured results pair by the capture metadata ``case_id`` when there is one, else by the input;
run rows by their case id, else by the input. The statistics are in ``simeval.scoring.compare``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import select

from simeval.errors import InvalidInput, NotFound
from simeval.scoring.compare import DEFAULT_RESAMPLES, DEFAULT_SEED, Case, Side, compare_sides
from simeval.service.filters import ResultFilter, meta_text, parse_meta
from simeval.service.models import CompareReport
from simeval.service.queries import iter_rows, version_refs
from simeval.service.results import ResultsMixin, run_row_missing
from simeval.store import Capture, Eval, Result, Run

MAX_SIDE = 100_000  # results read per side: beyond that a comparison is a job for `run`
# the metadata a side picker offers: read from this many of the newest captures, at most so
# many keys and values per key (a bounded read, whatever the number of captures)
META_RECENT, META_KEYS, META_VALUES, META_CHARS = 2000, 30, 50, 100
_RESERVED = ("eval", "since", "until")
_NOT_SIDES = ("case_id", *_RESERVED)  # metadata keys a side picker leaves out


def _unspeakable(key: str, value: str) -> bool:
    return (
        "," in key + value
        or "=" in key
        or ":" in key
        or key != key.strip()
        or value != value.strip()
        or not key
        or not value
    )


def _short(text: str | None, n: int = 80) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= n else flat[: n - 1] + "…"


def parse_side(spec: Any) -> tuple[str, Any]:
    """("run", id | "latest"), ("captures", {eval, since, until, meta}) or ("file", path).

    >>> parse_side("captures:engine=v2,since=7d")
    ('captures', {'eval': None, 'since': '7d', 'until': None, 'meta': (('engine', 'v2'),)})
    """
    if not isinstance(spec, str) or not spec.strip():
        raise InvalidInput(
            "a compare side is empty: give run:ID, run:latest, captures:... or a file"
        )
    spec = spec.strip()
    low = spec.lower()
    if low.startswith("run:"):
        what = spec[4:].strip()
        if what == "latest":
            return "run", "latest"
        if what.isdigit():
            return "run", int(what)
        raise InvalidInput(f"compare side {spec!r}: give run:ID or run:latest")
    if low == "captures" or low.startswith("captures:"):
        sel: dict[str, Any] = {"eval": None, "since": None, "until": None}
        meta: list[str] = []
        for part in spec[9:].split(",") if ":" in spec else []:
            if not part.strip():
                continue
            if "=" not in part:
                raise InvalidInput(f"compare side {spec!r}: {part.strip()!r} is not KEY=VALUE")
            key, value = (x.strip() for x in part.split("=", 1))
            if key in _RESERVED:
                sel[key] = value
            else:
                meta.append(f"{key}={value}")
        sel["meta"] = parse_meta(meta)
        return "captures", sel
    return "file", spec


class CompareMixin(ResultsMixin):
    """A/B comparison of runs, results files and captured results."""

    def compare(
        self,
        a: str,
        b: str,
        eval_name: str | None = None,
        seed: int = DEFAULT_SEED,
        resamples: int = DEFAULT_RESAMPLES,
        keep: int = 20,
        read_file: Callable[[str], Iterable[dict[str, Any]]] | None = None,
    ) -> CompareReport:
        """Compare side ``b`` with side ``a``, per eval (see ``scoring.compare``): n, pass rate
        and mean score of each side, B − A with 95% bootstrap intervals, McNemar on paired
        flips, a verdict, and the paired cases that regressed most with their missing terms (and
        those that improved most).
        ``eval_name`` keeps one eval only. ``read_file`` reads a side given as a results file
        (``simeval.runs.iter_results_file``; the CLI passes it): without it a file side is
        refused, so a server never opens a path taken from a request.

        >>> svc = Service(":memory:")  # doctest: +SKIP
        >>> svc.compare("run:1", "run:2").verdict  # doctest: +SKIP
        'no clear difference'
        """
        if isinstance(resamples, bool) or not isinstance(resamples, int):
            raise InvalidInput("resamples must be an integer")
        if not 100 <= resamples <= 20_000:
            raise InvalidInput(f"resamples must be between 100 and 20000, not {resamples}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InvalidInput(f"seed must be a non-negative integer, not {seed!r}")
        only = None
        if eval_name:
            with self.store.read() as s:
                only = self._find_eval(s, eval_name).name
        sides = [self._side(spec, read_file, only) for spec in (a, b)]
        report = compare_sides(sides[0], sides[1], seed=seed, resamples=resamples, keep=keep)
        if not report["evals"]:
            raise NotFound("neither side has any results to compare")
        return CompareReport.model_validate(report)

    def metadata_values(
        self, recent: int = META_RECENT, keys: int = META_KEYS, values: int = META_VALUES
    ) -> dict[str, list[str]]:
        """The capture metadata keys and their values seen in the ``recent`` newest captures
        (the commonest keys first, at most ``keys`` keys and the ``values`` commonest values
        of each, among equals the most recently seen, sorted; values as a filter compares
        them, ``meta_text``; none that a side spec could not carry, nor ``case_id``, which
        names cases, not sides). What the Compare page offers as side pickers."""
        seen: dict[str, dict[str, int]] = {}
        with self.store.read() as s:
            q = (
                select(Capture.meta)
                .where(Capture.meta.is_not(None))
                .order_by(Capture.id.desc())
                .limit(recent)
            )
            for (meta,) in s.execute(q):
                if not isinstance(meta, dict):
                    continue
                for key, value in meta.items():
                    if key in _NOT_SIDES or isinstance(value, dict | list) or value is None:
                        continue
                    text = meta_text(value)
                    # a side spec is KEY=VALUE,...: a comma or an "=" would not survive it
                    if len(text) > META_CHARS or len(key) > META_CHARS or _unspeakable(key, text):
                        continue
                    counts = seen.setdefault(str(key), {})
                    counts[text] = counts.get(text, 0) + 1
        top = sorted(seen.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))[:keys]
        return {
            key: sorted(v for v, _ in sorted(counts.items(), key=lambda x: -x[1])[:values])
            for key, counts in top
        }

    # -- sides ------------------------------------------------------------------------------
    def _side(
        self,
        spec: str,
        read_file: Callable[[str], Iterable[dict[str, Any]]] | None,
        only: str | None,
    ) -> Side:
        kind, what = parse_side(spec)
        if kind == "run":
            side = self._run_side(what)
        elif kind == "captures":
            side = self._captures_side(spec.strip(), what)
        else:
            if read_file is None:
                raise InvalidInput(
                    f"compare side {spec!r}: give run:ID, run:latest or captures:... "
                    "(results files are compared with the CLI)"
                )
            side = self._file_side(what, read_file(what))
        if only is not None:
            side.evals = {k: v for k, v in side.evals.items() if k == only}
        return side

    def _run_side(self, what: Any) -> Side:
        with self.store.read() as s:
            if what == "latest":
                run = s.scalar(select(Run).order_by(Run.created_at.desc(), Run.id.desc()).limit(1))
                if run is None:
                    raise NotFound("run:latest: no run is stored yet (simeval run --store)")
            else:
                run = s.get(Run, what)
                if run is None:
                    raise NotFound(f"no run with id {what}")
            side = Side(f"run:{run.id} ({run.name})")
            q = (
                select(Result)
                .where(Result.run_id == run.id)
                .order_by(Result.id)
                .limit(MAX_SIDE)
                .execution_options(yield_per=2000)
            )
            for n, r in enumerate(s.scalars(q)):
                exp = r.explanation or {}
                case = exp.get("case") or {}
                cid = case.get("id")
                key = str(cid) if cid is not None else (r.input or None)
                name = str(cid) if cid is not None else (_short(r.input) or f"row {n + 1}")
                side.add(
                    r.eval_name or "(no eval)",
                    Case(
                        key=key,
                        name=name,
                        score=r.score,
                        passed=r.passed,
                        output=r.output,
                        # rows are stored without their explanation: explained only for the
                        # cases a report lists
                        explain=self._run_row_missing(r.id, run.options or {}),
                        ref=f"r{r.id}",
                    ),
                )
            return side

    def _run_row_missing(self, result_id: int, options: dict[str, Any]) -> Callable[[], list[str]]:
        def missing() -> list[str]:
            with self.store.read() as s:
                row = s.get(Result, result_id)
                return [] if row is None else run_row_missing(row, options)

        return missing

    def _captures_side(self, label: str, sel: dict[str, Any]) -> Side:
        side = Side(label)
        with self.store.read() as s:
            f = ResultFilter.parse(
                eval_name=sel["eval"] or None,
                since=sel["since"],
                until=sel["until"],
                meta=sel["meta"],
            )
            names = dict(s.execute(select(Eval.id, Eval.name)).all())
            rows = []
            for row in iter_rows(s, f, self._eval_id(s, f), newest=False):
                rows.append(row)
                if len(rows) >= MAX_SIDE:
                    break
            refs = version_refs(s, {(r.eval_id, r.eval_version) for r in rows})
        for row in rows:
            cap = row.capture
            assert cap is not None
            meta = cap.meta if isinstance(cap.meta, dict) else {}
            cid = meta.get("case_id")
            key = str(cid) if cid is not None else (cap.input or None)
            name = str(cid) if cid is not None else (_short(cap.input) or f"capture {cap.id}")
            side.add(
                names.get(row.eval_id, f"eval {row.eval_id}"),  # type: ignore[arg-type]
                Case(
                    key=key,
                    name=name,
                    score=row.review.score if row.review is not None else row.score,
                    passed=row.passed,
                    output=cap.output,
                    explain=self._missing_of(row, refs),
                    ref=row.id,
                ),
            )
        return side

    def _missing_of(self, row: Any, refs: dict[tuple[int, int], list[str]]) -> Any:
        def missing() -> list[str]:
            cap = row.capture
            ref_list = refs.get((row.eval_id, row.eval_version), [])
            if not ref_list:
                return []
            exp = self._explain(row, cap.input, cap.output, ref_list)
            return [m["term"] for m in exp.get("missing") or [] if isinstance(m, dict)]

        return missing

    def _file_side(self, path: str, rows: Iterable[dict[str, Any]]) -> Side:
        side = Side(path)
        for n, row in enumerate(rows):
            if n >= MAX_SIDE:
                break
            side.add(
                row["eval"] or "(no eval)",
                Case(
                    key=row["case"],
                    name=row["name"],
                    score=row["score"],
                    passed=row["pass"],
                    output=row["output"],
                    missing=row["missing_terms"],
                ),
            )
        return side
