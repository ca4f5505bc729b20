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

Every case of both sides is read, column by column (``simeval.service.compare_read``: the
keys, scores and verdicts as numpy arrays, captured results straight from their packed blobs);
a side of more than ``limit`` results (``MAX_RESULTS``, every eval together) is compared on a
seeded uniform sample of case keys, the same cases on both sides, and the report says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from operator import itemgetter
from typing import Any, TypedDict

import numpy as np

from simeval.checks import MAX_ID
from simeval.errors import InvalidInput, NotFound, SimevalError
from simeval.jsontypes import JSONObject
from simeval.scoring.compare import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Case,
    Cases,
    compare_eval,
    pair_indices,
    sides_report,
)
from simeval.scoring.scorer import get_scorer
from simeval.service.base import Part
from simeval.service.capture_walk import CaptureScope, scope_select
from simeval.service.compare_read import (
    MAX_RESULTS,
    EvalColumns,
    KeyBook,
    SideColumns,
    sample_note,
)
from simeval.service.filters import ResultFilter, meta_matches, meta_text, parse_meta
from simeval.service.models import CompareReport
from simeval.service.queries import Row, capture_rows
from simeval.service.results import run_row_missing
from simeval.store import Tx
from simeval.store.captures_sql import captures_by_id
from simeval.store.compare_sql import (
    capture_review_scores,
    eval_names,
    latest_run,
    no_jit,
    recent_metadata,
    result_of,
    results_by_id,
    run_of,
    run_side_rows,
    shares_one_connection,
    side_columns,
    stream_side_rows,
)
from simeval.store.packing import packed_columns
from simeval.store.results_sql import capture_reviews, version_options, version_refs

_READ_CHUNK = 20_000  # rows read per step of a side
_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)
# the cases listed in full (name, output, missing terms): made only for those
Detail = Callable[[Sequence[int]], list[Case]]
# and their result ids alone (side A of a listed case shows no more), None: from the detail
Refs = Callable[[Sequence[int]], list[str | None]]
Details = tuple[Detail, Refs | None]
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


def parse_side(spec: object) -> tuple[str, Any]:
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


class CaptureSelection(TypedDict):
    """A ``captures:`` side as ``parse_side`` reads it: the eval, the time window and the
    metadata pairs its captured results are selected by."""

    eval: str | None
    since: str | None
    until: str | None
    meta: tuple[tuple[str, str], ...]


class CompareService(Part):
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
        *,
        limit: int | None = None,
    ) -> CompareReport:
        """Compare side ``b`` with side ``a``, per eval (see ``scoring.compare``): n, pass rate
        and mean score of each side, B − A with 95% bootstrap intervals, McNemar on paired
        flips, a verdict, and the paired cases that regressed most with their missing terms (and
        those that improved most).
        ``eval_name`` keeps one eval only. ``read_file`` reads a side given as a results file
        (``simeval.runs.iter_results_file``; the CLI passes it): without it a file side is
        refused, so a server never opens a path taken from a request.

        Every case is read. A side holding more than ``limit`` results (every eval together;
        None: ``MAX_RESULTS``, 10,000,000) is compared on a seeded uniform sample of case
        keys, the same cases on both sides (``simeval.service.compare_read``): ``sampled``
        says how, each side's ``total`` what it holds and ``n`` what was compared.

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
        if limit is None:
            limit = MAX_RESULTS
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvalidInput(f"limit must be a positive integer, not {limit!r}")
        only = None
        if eval_name:
            with self.store.read() as s:
                found = self._find_eval(s, eval_name)
                only = (found.id, found.name)
        read = self._read_sides((a, b), read_file, only, seed, limit)
        level = max(side.level for side, _ in read)
        for side, _ in read:
            side.restrict(level)  # the deeper sample on both: kept cases stay paired
        evals = _compare_evals(read, seed, resamples, keep)
        if not evals:
            raise NotFound("neither side has any results to compare")
        report = sides_report(read[0][0].label, read[1][0].label, evals, seed, resamples)
        report.update(limit=limit, sampled=sample_note(level, seed))
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
            for meta in recent_metadata(s, recent):
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
    def _read_sides(
        self,
        specs: tuple[str, str],
        read_file: Callable[[str], Iterable[dict[str, Any]]] | None,
        only: tuple[int, str] | None,
        seed: int,
        limit: int,
    ) -> list[tuple[SideColumns, Callable[[str, EvalColumns], Details]]]:
        """Both sides read, on PostgreSQL at once: each side in a thread of its own with
        its own read and its own key numbering (a ``KeyBook`` is not shared between
        threads), B's keys then joining A's numbering. The server's work for one side (the
        driver waits for it without the GIL) runs beside this process's work on the other:
        measured 1.4-1.7x faster at 500,000 cases per side on two cores. On SQLite one side
        after the other: its driver takes the GIL back for every row, and two threads
        reading slowed each other down (measured 1.6x slower); a store of one shared
        connection (``:memory:``) cannot be read twice at once either."""
        for spec in specs:
            parse_side(spec)  # a mistaken side refused before either is read
        if self.store.dialect != "postgresql" or shares_one_connection(self.store):
            book = KeyBook(seed)
            return [self._side(spec, read_file, only, book, limit) for spec in specs]
        books = (KeyBook(seed), KeyBook(seed))
        with ThreadPoolExecutor(2, thread_name_prefix="simeval-compare") as pool:
            futures = [
                pool.submit(self._side, spec, read_file, only, book, limit)
                for spec, book in zip(specs, books, strict=True)
            ]
            read = [f.result() for f in futures]
        read[1][0].renumber(books[0], books[0].absorb(books[1]))
        return read

    def _side(
        self,
        spec: str,
        read_file: Callable[[str], Iterable[dict[str, Any]]] | None,
        only: tuple[int, str] | None,
        book: KeyBook,
        limit: int,
    ) -> tuple[SideColumns, Callable[[str, EvalColumns], Details]]:
        kind, what = parse_side(spec)
        if kind == "run":
            return self._run_side(what, only, book, limit)
        if kind == "captures":
            return self._captures_side(spec.strip(), what, only, book, limit)
        if read_file is None:
            raise InvalidInput(
                f"compare side {spec!r}: give run:ID, run:latest or captures:... "
                "(results files are compared with the CLI)"
            )
        return _file_side(what, read_file(what), only, book, limit)

    def _run_side(
        self, what: object, only: tuple[int, str] | None, book: KeyBook, limit: int
    ) -> tuple[SideColumns, Callable[[str, EvalColumns], Details]]:
        with self.store.read() as s:
            if what == "latest":
                run = latest_run(s)
                if run is None:
                    raise NotFound("run:latest: no run is stored yet (simeval run --store)")
            else:
                # an id past the backend's integer is no stored run (not a driver error)
                run = run_of(s, what) if isinstance(what, int) and 1 <= what <= MAX_ID else None
                if run is None:
                    raise NotFound(f"no run with id {what}")
            side = SideColumns(f"run:{run.id} ({run.name})", book, limit)
            options = dict(run.options or {})
            eval_name = None if only is None else only[1]
            for part in run_side_rows(s, run.id, eval_name, _READ_CHUNK):
                n = len(part)
                side.add(
                    book.numbers_of([r[2] for r in part]),
                    np.fromiter((r[0] for r in part), np.int64, n),
                    np.fromiter(
                        (side.eval_number(r[1] or "(no eval)", r[1] or "(no eval)") for r in part),
                        np.int32,
                        n,
                    ),
                    np.fromiter((r[3] for r in part), np.float64, n),
                    np.fromiter((bool(r[4]) for r in part), np.bool_, n),
                    np.arange(n),
                )
        return side, lambda name, cols: self._run_details(cols, options)

    def _run_details(self, cols: EvalColumns, options: JSONObject) -> Details:
        def refs(idx: Sequence[int]) -> list[str | None]:
            return [f"r{int(cols.refs[i])}" for i in idx]

        def details(idx: Sequence[int]) -> list[Case]:
            ids = [int(cols.refs[i]) for i in idx]
            with self.store.read() as s:
                rows = results_by_id(s, ids)
            out = []
            for i, rid in zip(idx, ids, strict=True):
                r = rows.get(rid)
                if r is None:  # deleted since: what the columns hold
                    out.append(
                        Case(
                            None,
                            f"row {rid}",
                            float(cols.scores[i]),
                            bool(cols.passed[i]),
                            ref=f"r{rid}",
                        )
                    )
                    continue
                cid = ((r.explanation or {}).get("case") or {}).get("id")
                name = str(cid) if cid is not None else (_short(r.input) or f"row {rid}")
                # rows are stored without their explanation: explained only for the cases
                # a report lists
                out.append(
                    Case(None, name, r.score, r.passed, r.output,
                         explain=self._run_row_missing(r.id, options), ref=f"r{r.id}")
                )  # fmt: skip
            return out

        return details, refs

    def _run_row_missing(self, result_id: int, options: JSONObject) -> Callable[[], list[str]]:
        def missing() -> list[str]:
            with self.store.read() as s:
                row = result_of(s, result_id)
                return [] if row is None else run_row_missing(row, options)

        return missing

    def _captures_side(
        self,
        label: str,
        sel: CaptureSelection,
        only: tuple[int, str] | None,
        book: KeyBook,
        limit: int,
    ) -> tuple[SideColumns, Callable[[str, EvalColumns], Details]]:
        side = SideColumns(label, book, limit)
        f = ResultFilter.parse(
            eval_name=sel["eval"] or None, since=sel["since"], until=sel["until"], meta=sel["meta"]
        )
        ids_of: dict[str, int] = {}
        with self.store.read() as s:
            wanted = self._eval_id(s, f)
            if only is not None:
                wanted = only[0] if wanted in (None, only[0]) else -1  # -1: no eval is both
            names = eval_names(s)
            reviews = capture_review_scores(s)
            scope = CaptureScope(meta=f.meta, since=f.since, until=f.until, scored=True)
            q, checked = scope_select(s, scope, side_columns(s))
            no_jit(s)  # a side read once, with trivial expressions per row: see ``no_jit``
            reader = _CapturedChunks(side, names, reviews, wanted, checked)
            for part in stream_side_rows(s, q, _READ_CHUNK):
                reader.add(part)
            ids_of = reader.ids_of
        return side, lambda name, cols: self._capture_details(cols, ids_of[name])

    def _capture_details(self, cols: EvalColumns, eval_id: int) -> Details:
        def refs(idx: Sequence[int]) -> list[str | None]:
            return [f"{int(cols.refs[i])}-{eval_id}" for i in idx]

        def details(idx: Sequence[int]) -> list[Case]:
            ids = [int(cols.refs[i]) for i in idx]
            with self.store.read() as s:
                rows = _capture_rows(s, set(ids), eval_id)
                refs = version_refs(s, {(r.eval_id, r.eval_version) for r in rows.values()})
                options = version_options(s, set(refs))
            out = []
            for i, cid in zip(idx, ids, strict=True):
                row = rows.get(cid)
                if row is None:  # deleted since: what the columns hold
                    out.append(
                        Case(None, f"capture {cid}", float(cols.scores[i]),
                             bool(cols.passed[i]), ref=f"{cid}-{eval_id}")
                    )  # fmt: skip
                    continue
                cap = row.capture
                assert cap is not None  # a captured result's row
                meta = cap.meta if isinstance(cap.meta, dict) else {}
                case_id = meta.get("case_id")
                name = (
                    str(case_id) if case_id is not None else (_short(cap.input) or f"capture {cid}")
                )
                score = row.review.score if row.review is not None else row.score
                out.append(
                    Case(None, name, score, row.passed, cap.output,
                         explain=_missing_of(row, refs, options), ref=row.id)
                )  # fmt: skip
            return out

        return details, refs


def _missing_of(
    row: Row,
    refs: dict[tuple[int, int], list[str]],
    options: dict[tuple[int, int], dict[str, Any]],
) -> Callable[[], list[str]]:
    """The reference terms a captured result's output misses (its eval version's scorer,
    as ``get_result`` explains it), computed only when asked (the B side of a listed case)."""

    def missing() -> list[str]:
        cap, eval_id, version = row.capture, row.eval_id, row.eval_version
        assert cap is not None and eval_id is not None and version is not None  # captured
        at = (eval_id, version)
        ref_list = refs.get(at, [])
        if not ref_list:
            return []
        try:
            scorer = get_scorer(**options.get(at, {}))
        except SimevalError:
            return []  # the scorer cannot be built now: nothing to say, as get_result notes
        exp = scorer.explain(cap.output, ref_list, top=10, input=cap.input)
        return [t.term for t in exp.missing]

    return missing


def _compare_evals(
    read: list[tuple[SideColumns, Callable[[str, EvalColumns], Details]]],
    seed: int,
    resamples: int,
    keep: int,
) -> list[dict[str, object]]:
    """Every eval of either side compared, one at a time: its columns gathered, compared
    and let go (memory: the chunks read and one eval's copy). The evals of one capture
    share their case keys: their pairing is made once."""
    evals = []
    last: tuple[np.ndarray, np.ndarray, tuple[np.ndarray, np.ndarray]] | None = None
    for name in sorted(set(read[0][0].names) | set(read[1][0].names)):
        pair: list[Cases | list[Case]] = []
        for side, details in read:
            cols = side.columns(name)
            pair.append(
                []
                if cols is None
                else Cases(cols.keys, cols.scores, cols.passed, *details(name, cols))
            )
        a, b = pair
        pairs = None
        if isinstance(a, Cases) and isinstance(b, Cases):
            if (
                last is not None
                and np.array_equal(last[0], a.keys)
                and np.array_equal(last[1], b.keys)
            ):
                pairs = last[2]
            else:
                pairs = pair_indices(a.keys, b.keys)
                last = (a.keys, b.keys, pairs)
        row = compare_eval(a, b, seed, resamples, keep, pairs=pairs)
        for at, (side, _) in zip("ab", read, strict=True):
            row[at]["total"] = side.total[side.names.index(name)] if name in side.names else 0
        evals.append({"eval": name, **row})
    return evals


def _capture_rows(s: Tx, ids: set[int], eval_id: int) -> dict[int, Row]:
    """The ``Row`` of ``eval_id`` of each capture of ``ids`` still stored, by capture id."""
    caps = list(captures_by_id(s, list(ids)).values())
    reviews = capture_reviews(s, [c.id for c in caps])
    out = {}
    for cap in caps:
        for row in capture_rows(s, cap, reviews):
            if row.eval_id == eval_id:
                out[cap.id] = row
    return out


class _CapturedChunks:
    """Chunks of (capture id, case key, packed results[, metadata]) rows into a side's
    columns: the results of the wanted eval (None: all; -1: none), a review's score and
    verdict in place of the automated ones."""

    def __init__(
        self,
        side: SideColumns,
        names: dict[int, str],
        reviews: dict[tuple[int, int], float],
        wanted: int | None,
        checked: tuple[tuple[str, str], ...],
    ):
        self.side, self.names, self.reviews = side, names, reviews
        self.wanted, self.checked = wanted, checked
        self.reviewed = np.array(sorted({c for c, _ in reviews}), np.int64)
        self.ids_of: dict[str, int] = {}  # eval name -> id

    def add(self, rows: Sequence[Any]) -> None:
        if self.checked:
            rows = [r for r in rows if meta_matches(r[-1], self.checked)]
        n = len(rows)
        if not n or self.wanted == -1:
            return
        # (id, key, blob[, metadata]) rows: each column by ``map(itemgetter)`` (measured
        # faster than a comprehension or transposing them with zip)
        ids = np.fromiter(map(_FIRST, rows), np.int64, n)
        keys = self.side.book.numbers_of(list(map(_SECOND, rows)))
        cols = packed_columns(list(map(_THIRD, rows)), self.wanted)
        case, eval_ids, scores, passed = cols.case, cols.eval_ids, cols.scores, cols.passed
        if self.reviewed.shape[0]:
            caps = ids[case]
            maybe = np.flatnonzero(np.isin(caps, self.reviewed)).tolist()
            if maybe:
                scores, passed = scores.copy(), passed.copy()
            for i in maybe:
                got = self.reviews.get((int(caps[i]), int(eval_ids[i])))
                if got is not None:
                    scores[i], passed[i] = got, got >= cols.thresholds[i]
        if self.wanted is not None:
            mine = eval_ids == self.wanted
            case, eval_ids, scores, passed = case[mine], eval_ids[mine], scores[mine], passed[mine]
        found, inverse = np.unique(eval_ids, return_inverse=True)
        dense = np.zeros(found.shape[0], np.int32)
        for j, e in enumerate(found.tolist()):
            name = self.names.get(e, f"eval {e}")
            self.ids_of[name] = e
            dense[j] = self.side.eval_number(e, name)
        self.side.add(keys, ids, dense[inverse], scores, passed, case)


def _file_side(
    path: str,
    rows: Iterable[dict[str, Any]],
    only: tuple[int, str] | None,
    book: KeyBook,
    limit: int,
) -> tuple[SideColumns, Callable[[str, EvalColumns], Details]]:
    """A results file's rows as a side (their cases kept whole: the CLI reads its own files)."""
    side = SideColumns(path, book, limit)
    cases: list[Case] = []
    evals: list[int] = []

    def flush(start: int) -> None:
        part = cases[start:]
        n = len(part)
        side.add(
            book.numbers_of([c.key for c in part]),
            np.arange(start, start + n, dtype=np.int64),
            np.asarray(evals[start:], np.int32),
            np.fromiter((c.score for c in part), np.float64, n),
            np.fromiter((bool(c.passed) for c in part), np.bool_, n),
            np.arange(n),
        )

    done = 0
    for row in rows:
        name = row["eval"] or "(no eval)"
        if only is not None and name != only[1]:
            continue
        evals.append(side.eval_number(name, name))
        cases.append(
            Case(key=row["case"], name=row["name"], score=row["score"], passed=row["pass"],
                 output=row["output"], missing=row["missing_terms"])
        )  # fmt: skip
        if len(cases) - done >= _READ_CHUNK:
            flush(done)
            done = len(cases)
    if len(cases) > done:
        flush(done)

    def details(name: str, cols: EvalColumns) -> Details:
        return (lambda idx: [cases[int(cols.refs[i])] for i in idx]), None

    return side, details
