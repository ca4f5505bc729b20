"""Export of results as flat rows, CSV or JSON, streamed with bounded memory.

Every face streams: ``iter_export`` gives the document in pieces (the API's streamed answer),
``write_export`` writes them to a file (the CLI), ``iter_export_rows`` gives the rows as dicts.
The rows are read a chunk at a time through ``simeval.service.queries.iter_rows`` inside one
read session (one consistent snapshot), and what a row names beyond its capture (the eval's
name, the matched reference, the run's status) is read once per export, not once per row.

A failing captured row's ``reasoning`` names the reference terms its output lacks (or the
required terms it misses). Those are computed here in bulk, through the eval-set engine: the
versions met are prepared once (``simeval.scoring.evalset.EvalSet``: scorer, reference vectors,
required terms), a capture's output is vectorised once per scorer configuration whatever the
number of its failing rows, and the missing terms come from the explainer's fast path
(``Explainer.missing_of``). Where that path does not apply (word n-grams, the ``pair`` IDF, a
blank output, a row scored by another scorer than the version's current one, or a row missing
no reference term, whose reasoning gives the explanation's ``reason``), the row is explained
in full as a stored result is shown (``Scorer.explain``): the same words either way.
"""

from __future__ import annotations

import csv
import heapq
import io
import json
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from itertools import chain, islice
from typing import IO, Any, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from simeval.checks import as_utc
from simeval.errors import InvalidInput
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.scoring.explain import Explainer, Reference, explainer
from simeval.scoring.required import Required
from simeval.service.capture_walk import scope_select
from simeval.service.filters import ResultFilter, filter_of, meta_matches
from simeval.service.models import ResultOut
from simeval.service.queries import Row, capture_reviews, capture_scope, iter_rows, iter_run_rows
from simeval.service.results import ResultsMixin
from simeval.service.runstatus import effective_status
from simeval.store import Capture, Eval, EvalVersion, Result, Run, unpack_results

EXPORT_COLUMNS = (
    "result_id",
    "capture_id",
    "run_id",
    "run_status",
    "conversation_id",
    "captured_at",
    "eval_name",
    "eval_type",
    "eval_version",
    "input",
    "output",
    "score",
    "pass",
    "automated_pass",
    "threshold",
    "human_override_score",
    "human_override_note",
    "reviewed_at",
    "fingerprint",
    "matched_reference",
    "metadata",
    "reasoning",
    "missing_required",
)
EXPORT_CHUNK = 1000  # rows written per piece of the document (and run rows read per step)
_ASKED_LIMIT = 10_000  # inputs whose terms an export keeps
CAPTURE_CHUNK = 500  # captures read (their reviews, versions and names with them) per step
REASON_TERMS = 5  # missing terms a failing row's reasoning names


def reason_line(
    score: float,
    passed: bool,
    threshold: float,
    reviewed: bool,
    required: Sequence[str],
    missing: Sequence[str],
    reason: str | None,
) -> str:
    """The verdict in one line from its parts: ``score`` the effective one (a review's when
    ``reviewed``), ``required`` the required terms missed, ``missing`` the reference terms
    missed (heaviest first), ``reason`` the explanation's reason."""
    if required and not reviewed:
        # failed whatever the score: the number alone would not say why
        return f"{score:.2f}: required term missing: " + ", ".join(required)
    line = f"{score:.2f} {'≥' if passed else '<'} {threshold:.2f}"
    if reviewed:
        line += " (reviewed)"
    if not passed and missing:
        line += ": missing " + ", ".join(missing[:REASON_TERMS])
    elif not passed and reason:
        line += f": {reason}"
    return line


def _explained_terms(exp: dict[str, Any]) -> tuple[list[str], list[str], str | None]:
    """(required terms missed, missing terms, reason) of an explanation's dict."""
    missing = [m.get("term") if isinstance(m, dict) else str(m) for m in exp.get("missing") or []]
    return list(exp.get("missing_required") or []), [m for m in missing if m], exp.get("reason")


def reasoning(out: ResultOut) -> str:
    """The verdict in one line: "0.65 < 0.80: missing seine, paris" (or "0.91 ≥ 0.80")."""
    score = out.review.score if out.review is not None else out.score
    required, missing, reason = _explained_terms(out.explanation or {})
    return reason_line(
        score, out.passed, out.threshold, out.review is not None, required, missing, reason
    )


# A spreadsheet runs a cell that starts with one of these as a formula (CSV injection)
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def neutralise_formula(text: str) -> str:
    """``text`` as a spreadsheet shows it, never runs it: a leading ``'`` before a formula
    prefix (OWASP's advice for CSV exports).

    >>> neutralise_formula("=HYPERLINK(1)"), neutralise_formula("Paris")
    ("'=HYPERLINK(1)", 'Paris')
    """
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def _check_format(fmt: str) -> None:
    if fmt not in ("csv", "json"):
        raise InvalidInput(f"export format must be csv or json, not {fmt!r}")


class _Version:
    """One eval version as the export explains its rows: prepared once (``EvalSet``)."""

    __slots__ = (
        "engine",
        "fingerprint",
        "group",
        "key",
        "member",
        "refs",
        "required",
        "scorer",
        "spec",
    )

    def __init__(self, evalset: EvalSet, group: Any, member: int):
        self.group, self.member = group, member
        self.spec = evalset.evals[group.positions[member]]
        self.scorer = group.scorer
        self.key = id(group.scorer)  # a capture's vector serves every version of this scorer
        self.fingerprint = group.scorer.fingerprint
        # the explainer's fast path (None for word n-grams and the pair IDF) and the
        # eval's required terms, as the eval-set engine prepared them
        self.engine: Explainer | None = explainer(group.scorer)
        self.required: Required | None = group.required[member]
        self.refs: dict[int, Reference] = {}  # matched index -> kept reference

    def reference(self, at: int) -> Reference:
        ref = self.refs.get(at)
        if ref is None:
            ref = self.refs[at] = Reference(
                self.spec.references[at], self.group.prepared[self.member][at]
            )
        return ref


class _Lookups:
    """What the rows of one export name beyond their capture, read once per export (a chunk
    reads only what no earlier chunk met): eval names and types, each (eval, version)'s
    references and prepared scorer, each run's status. ``for_csv``: the texts as the CSV
    writes them (``neutralise_formula``), made once."""

    def __init__(self, s: Session, for_csv: bool):
        self.s = s
        self.text: Callable[[str], str] = neutralise_formula if for_csv else str
        self.names: dict[int, tuple[str | None, str]] = {}
        self.refs: dict[tuple[int, int], list[str]] = {}
        self.versions: dict[tuple[int, int], _Version | None] = {}
        self.status: dict[int | None, str] = {}
        self.asked: dict[tuple[int, str], bytes] = {}  # (scorer id, input) -> its terms
        # per (eval, version) met: (name, type, references, prepared version), one lookup
        self.pairs: dict[tuple[int, int], tuple[Any, str, Sequence[str], _Version | None]] = {}

    def load(self, eval_ids: set[int], pairs: set[tuple[int, int]], runs: set[int]) -> None:
        """Read what these evals, versions and runs need that was not read before."""
        s, text = self.s, self.text
        ids = eval_ids - self.names.keys()
        if ids:
            q = select(Eval.id, Eval.name, Eval.type).where(Eval.id.in_(ids))
            self.names.update({i: (text(n), text(t or "similarity")) for i, n, t in s.execute(q)})
        pairs = pairs - self.versions.keys()
        if pairs:
            self._load_versions(pairs)
            unnamed = (None, text("similarity"))
            for pair in pairs:
                name, etype = self.names.get(pair[0], unnamed)
                self.pairs[pair] = (name, etype, self.refs.get(pair, ()), self.versions[pair])
        runs = runs - self.status.keys()
        if runs:
            for run in s.scalars(select(Run).where(Run.id.in_(runs))):
                self.status[run.id] = effective_status(run)

    def load_rows(self, rows: list[Row]) -> None:
        """``load`` for run rows."""
        self.load(
            {r.eval_id for r in rows if r.eval_id is not None},
            set(),
            {r.run_row.run_id for r in rows if r.run_row is not None and r.run_row.run_id},
        )

    def _load_versions(self, pairs: set[tuple[int, int]]) -> None:
        q = select(EvalVersion).where(EvalVersion.eval_id.in_({e for e, _ in pairs}))
        found = {(v.eval_id, v.version): v for v in self.s.scalars(q)}
        specs = []
        for pair in pairs:
            self.versions[pair] = None
            v = found.get(pair)
            if v is None:
                continue
            self.refs[pair] = [self.text(r) for r in v.references]
            options = tuple(sorted(dict(v.options).items()))
            specs.append(
                EvalSpec(v.eval_id, "", v.version, tuple(v.references), v.threshold, None, options)
            )
        # an eval whose scorer cannot be built now (its IDF table file gone) is left out:
        # its rows are exported without missing terms, as a result shown alone says
        evalset = EvalSet(specs, skip_broken=True)
        for group in evalset.groups:
            for member, position in enumerate(group.positions):
                spec = evalset.evals[position]
                self.versions[(cast(int, spec.id), spec.version)] = _Version(evalset, group, member)


class _Why:
    """The bulk explanations of one capture's failing rows: its output's vector and its
    input's terms made once per scorer (evals of one configuration share it)."""

    __slots__ = ("asked", "input", "output", "terms", "vectors")

    def __init__(self, input: str, output: str, asked: dict[tuple[int, str], bytes]):
        self.input, self.output, self.asked = input, output, asked
        self.vectors: dict[int, bytes] = {}
        self.terms: dict[int, bytes] = {}

    def of(
        self, v: _Version, at: int, fingerprint: str, reviewed: bool
    ) -> tuple[list[str], list[str], str | None]:
        """(required terms missed, missing reference terms, reason) of a failing row of
        version ``v`` that matched reference ``at`` with a scorer of ``fingerprint``."""
        scorer, key, output = v.scorer, v.key, self.output
        vec = self.vectors.get(key)
        if vec is None:
            vec = self.vectors[key] = scorer.vector(output) if output.strip() else b""
        required = v.required.missing(vec) if v.required is not None else []
        if required and not reviewed:
            return required, [], None  # the reasoning names only these
        engine = v.engine
        if (
            engine is not None
            and vec
            and v.fingerprint == fingerprint
            and 0 <= at < len(v.spec.references)
        ):
            terms = self.terms.get(key)
            if terms is None:
                # the same question recurs across captures: its terms kept (a bounded cache)
                asked = self.asked
                terms = asked.get((key, self.input))
                if terms is None:
                    if len(asked) > _ASKED_LIMIT:
                        asked.clear()
                    terms = asked[key, self.input] = scorer.input_terms(self.input)
                self.terms[key] = terms
            missing = engine.missing_of(v.reference(at), vec, terms, REASON_TERMS)
            if missing:
                return required, missing, None
        # the full explanation, as a result shown alone has it
        exp = scorer.explain(output, list(v.spec.references), top=10, input=self.input)
        return list(exp.missing_required), [t.term for t in exp.missing], exp.reason


_CAPTURE_COLUMNS = [
    Capture.id,
    Capture.input,
    Capture.output,
    Capture.conversation_id,
    Capture.meta,
    Capture.captured_at,
    Capture.scores,
]
_Item = tuple[datetime, int, int, list[tuple[Any, ...]]]  # (time, kind, id, its rows)


def _item_key(item: _Item) -> tuple[datetime, int, int]:
    return item[0], item[1], item[2]


def _captured_items(
    s: Session, f: ResultFilter, eval_id: int | None, look: _Lookups, for_csv: bool
) -> Iterator[_Item]:
    """Per capture of ``f``'s scope (oldest first), its rows that ``f`` keeps: the captures
    read as plain columns a chunk at a time (``scope_select``), their results unpacked, the
    reviews of a chunk read at once."""
    q, checked = scope_select(s, capture_scope(f), _CAPTURE_COLUMNS)
    result = s.connection().execute(q.execution_options(yield_per=CAPTURE_CHUNK))
    text = look.text
    truth: tuple[Any, Any] = ("false", "true") if for_csv else (False, True)
    info = look.pairs
    want_review, want_pass = f.reviewed, f.passed
    unknown = (None, text("similarity"), (), None)
    for part in result.partitions():
        if checked:
            part = [row for row in part if meta_matches(row[-1], checked)]
        packs = [unpack_results(row[6]) for row in part]
        pairs = {pair for p in packs for pair in zip(p.eval_ids, p.versions, strict=True)}
        look.load({e for e, _ in pairs}, pairs, set())
        reviews = capture_reviews(s, [row[0] for row in part])
        for row, p in zip(part, packs, strict=True):
            cid, input_, output, conv, meta, at = row[:6]
            at_text = as_utc(at).isoformat()
            if for_csv:
                input_c, output_c = text(input_), text(output)
                conv = None if conv is None else text(conv)
                meta = None if meta is None else json.dumps(meta, ensure_ascii=False)
            else:
                input_c, output_c = input_, output
            why: _Why | None = None
            fps = p.fingerprints
            out = []
            columns = (p.eval_ids, p.versions, p.scores, p.thresholds, p.matched, p.passed,
                       p.fp_index)  # fmt: skip
            for eid, version, auto_score, threshold, matched_at, ok, fpi in zip(
                *columns, strict=True
            ):
                if eval_id is not None and eid != eval_id:
                    continue
                review = reviews.get((cid, eid)) if reviews else None
                auto = ok != 0
                if review is None:
                    if want_review:
                        continue
                    passed, score = auto, auto_score
                    r_score = r_note = r_at = None
                else:
                    if want_review is False:
                        continue
                    r_score, r_note = review.score, text(review.note)
                    r_at = as_utc(review.created_at).isoformat()
                    passed, score = r_score >= threshold, r_score
                if want_pass is not None and passed != want_pass:
                    continue
                fp = fps[fpi]
                name, etype, ref_list, v = info.get((eid, version), unknown)
                if passed and review is None:
                    line, lacking = f"{score:.2f} ≥ {threshold:.2f}", ""
                else:
                    required: list[str] = []
                    missing: list[str] = []
                    reason = None
                    if not passed and v is not None and ref_list:
                        if why is None:
                            why = _Why(input_, output, look.asked)
                        required, missing, reason = why.of(v, matched_at, fp, review is not None)
                    line = reason_line(
                        score, passed, threshold, review is not None, required, missing, reason
                    )
                    lacking = text(", ".join(required)) if required else ""
                out.append(
                    (f"{cid}-{eid}", cid, None, None, conv, at_text, name, etype, version,
                     input_c, output_c, auto_score, truth[passed], truth[auto], threshold,
                     r_score, r_note, r_at, fp,
                     ref_list[matched_at] if matched_at < len(ref_list) else None,
                     meta, line, lacking)
                )  # fmt: skip
            if out:
                yield at, 1, cid, out


def _run_items(rows: Iterator[Row], look: _Lookups, for_csv: bool) -> Iterator[_Item]:
    """Per data-set run row, its export row (their evals' names and runs' status read a
    chunk at a time)."""
    text = look.text
    truth: tuple[Any, Any] = ("false", "true") if for_csv else (False, True)
    while chunk := list(islice(rows, EXPORT_CHUNK)):
        look.load_rows(chunk)
        for r in chunk:
            run = cast(Result, r.run_row)
            review = r.review
            name, etype = look.names.get(r.eval_id, (None, None)) if r.eval_id else (None, None)
            if name is None and run.eval_name is not None:
                name = text(run.eval_name)
            score = review.score if review is not None else r.score
            required, missing, reason = _explained_terms(run.explanation or {})
            line = reason_line(
                score, r.passed, r.threshold, review is not None, required, missing, reason
            )
            if review is None:
                reviewed: tuple[Any, ...] = (None, None, None)
            else:
                reviewed = (review.score, text(review.note), as_utc(review.created_at).isoformat())
            row = (
                r.id, None, run.run_id, look.status.get(run.run_id), None,
                as_utc(r.created_at).isoformat(), name, etype or text("similarity"),
                r.eval_version, text(run.input or ""), text(run.output or ""), r.score,
                truth[r.passed], truth[r.automated_passed], r.threshold, *reviewed,
                text(r.fingerprint), None if run.reference is None else text(run.reference),
                None, text(line), text(", ".join(required)),
            )  # fmt: skip
            yield r.created_at, 0, int(r.id[1:]), [row]


class ExportMixin(ResultsMixin):
    """Results export."""

    def _export_values(
        self, s: Session, f: ResultFilter, for_csv: bool
    ) -> Iterator[tuple[Any, ...]]:
        """The rows of ``f`` as tuples in ``EXPORT_COLUMNS`` order, oldest first, in the
        order of ``iter_rows``. ``for_csv``: the values as the CSV writes them (texts with
        ``neutralise_formula``, booleans as true/false, metadata as its JSON text), each made
        once where several rows share it."""
        eval_id = self._eval_id(s, f)
        look = _Lookups(s, for_csv)
        if f.run_id is not None:  # one run's rows: no capture
            items: Iterator[_Item] = _run_items(iter_rows(s, f, eval_id, False), look, for_csv)
        else:
            items = _captured_items(s, f, eval_id, look, for_csv)
            if not f.captures_only:
                runs = iter_run_rows(s, f, eval_id, newest=False)
                first = next(runs, None)
                if first is not None:
                    run_items = _run_items(chain((first,), runs), look, for_csv)
                    items = heapq.merge(items, run_items, key=_item_key)
        for item in items:
            yield from item[3]

    def iter_export_rows(
        self, where: ResultFilter | None = None, **filters: Any
    ) -> Iterator[dict[str, Any]]:
        """The results matching ``where`` (or its fields as keywords, as ``list_results``
        takes them) as flat rows (``EXPORT_COLUMNS``), oldest first, streamed: ``score`` is
        the automated score, ``pass`` the effective verdict, ``human_override_*`` the review."""
        f = filter_of(where, filters)
        with self.store.read() as s:
            for values in self._export_values(s, f, for_csv=False):
                yield dict(zip(EXPORT_COLUMNS, values, strict=True))

    def iter_export(
        self, fmt: str = "csv", where: ResultFilter | None = None, **filters: Any
    ) -> Iterator[str]:
        """The CSV or JSON document of the results matching ``where`` (or its fields as
        keywords), in pieces of ``EXPORT_CHUNK`` rows: what the API streams. The format and
        the eval the filter names are checked now (``InvalidInput``, ``NotFound``), before
        the first piece; the rows are read as the pieces are taken, in one read session."""
        f = filter_of(where, filters)
        _check_format(fmt)
        with self.store.read() as s:
            self._eval_id(s, f)
        return (text for _, text in self._pieces(fmt, f))

    def _pieces(self, fmt: str, f: ResultFilter) -> Iterator[tuple[int, str]]:
        """(rows so far, text) per piece of the document."""
        buf = io.StringIO()
        n = 0
        with self.store.read() as s:
            values = self._export_values(s, f, for_csv=fmt == "csv")
            if fmt == "csv":
                writer = csv.writer(buf, lineterminator="\n")
                writer.writerow(EXPORT_COLUMNS)
                while chunk := list(islice(values, EXPORT_CHUNK)):
                    writer.writerows(chunk)
                    n += len(chunk)
                    yield n, buf.getvalue()
                    buf.seek(0)
                    buf.truncate()
                if n == 0:
                    yield 0, buf.getvalue()
                return
            dumps = json.JSONEncoder(ensure_ascii=False).encode
            head = "[\n"
            while chunk := list(islice(values, EXPORT_CHUNK)):
                text = ",\n".join(
                    dumps(dict(zip(EXPORT_COLUMNS, row, strict=True))) for row in chunk
                )
                yield n + len(chunk), head + text
                head = ",\n"
                n += len(chunk)
            yield n, "\n]\n" if n else "[]\n"

    def write_export(
        self,
        fp: IO[str],
        fmt: str = "csv",
        progress: Callable[[int], None] | None = None,
        where: ResultFilter | None = None,
        **filters: Any,
    ) -> int:
        """Write the results matching ``where`` (or its fields as keywords) as CSV or JSON to
        a text file object, streaming; returns the count. ``progress(n)`` is called every
        1,000 rows."""
        f = filter_of(where, filters)
        n = 0
        _check_format(fmt)
        for n, text in self._pieces(fmt, f):
            fp.write(text)
            if progress:
                progress(n)
        return n

    def export_results(
        self, fmt: str = "csv", where: ResultFilter | None = None, **filters: Any
    ) -> str:
        """The results matching ``where`` (or its fields as keywords) as a CSV or JSON
        document in one string (see ``iter_export_rows`` for the columns). For a large
        selection, ``write_export`` (to a file) or ``iter_export`` (in pieces) hold only a
        piece at a time."""
        return "".join(self.iter_export(fmt, filter_of(where, filters)))
