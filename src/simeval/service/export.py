"""Export of results as flat rows, CSV or JSON, streamed with bounded memory.

Every face streams: ``iter_export`` gives the document in pieces (the API's streamed answer),
``write_export`` writes them to a file (the CLI), ``iter_export_rows`` gives the rows as dicts.
The rows are read a chunk at a time inside one read session (one consistent snapshot): the
captures' columns straight from the driver (``simeval.store.export_sql``; on PostgreSQL a
binary server-side cursor), a data-set run's rows through ``simeval.service.queries``, merged
by time. What a row names beyond its capture (the eval's name, the matched reference, the
run's status) is read once per export, not once per row, and the CSV is written as cells:
what the rows of a capture or an eval version share (texts, time, metadata, references) is
made into a cell once and each row joined from cells (``csv_cell``), the bytes
``csv.writer`` would write, without it scanning every shared text again on every row. The
JSON document is made the same way from encoded values (``_captured_json``), the same text as
each row's object encoded whole.

A failing captured row's ``reasoning`` names the reference terms its output lacks (or the
required terms it misses). Those are computed here in bulk, through the eval-set scorer: the
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
from typing import IO, Any, Protocol, cast

from simeval.checks import as_utc
from simeval.csvcells import neutralise_formula
from simeval.errors import InvalidInput
from simeval.jsontypes import JSONObject
from simeval.scoring.evalset import EvalSet, EvalSpec
from simeval.scoring.explain import Explainer, Reference, explainer
from simeval.scoring.required import Required
from simeval.scoring.scorer import Scorer
from simeval.service.base import Part
from simeval.service.capture_walk import scope_select
from simeval.service.filters import ResultFilter, filter_of, meta_matches
from simeval.service.models import ResultOut
from simeval.service.queries import Row, capture_scope, iter_rows, iter_run_rows
from simeval.service.runstatus import effective_status
from simeval.store import PackedResults, Result, Review, Tx, unpack_results
from simeval.store.export_sql import (
    CAPTURE_COLUMNS,
    gives_text,
    runs_of,
    stream_capture_rows,
    versions_of_evals,
)
from simeval.store.results_sql import capture_reviews, eval_names_types

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


def _check_format(fmt: str) -> None:
    if fmt not in ("csv", "json"):
        raise InvalidInput(f"export format must be csv or json, not {fmt!r}")


class _ScorerGroup(Protocol):
    """The evals of an ``EvalSet`` that share one scorer, as a version reads them."""

    scorer: Scorer
    positions: list[int]
    prepared: list[list[bytes]]
    required: list[Required | None]


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

    def __init__(self, evalset: EvalSet, group: _ScorerGroup, member: int):
        self.group, self.member = group, member
        self.spec = evalset.evals[group.positions[member]]
        self.scorer = group.scorer
        self.key = id(group.scorer)  # a capture's vector serves every version of this scorer
        self.fingerprint = group.scorer.fingerprint
        # the explainer's fast path (None for word n-grams and the pair IDF) and the
        # eval's required terms, as the eval-set scorer prepared them
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

    def __init__(self, s: Tx, for_csv: bool):
        self.s = s
        self.text: Callable[[str], str] = neutralise_formula if for_csv else str
        self.names: dict[int, tuple[str | None, str]] = {}
        self.refs: dict[tuple[int, int], list[str]] = {}
        self.versions: dict[tuple[int, int], _Version | None] = {}
        self.status: dict[int | None, str] = {}
        self.asked: dict[tuple[int, str], bytes] = {}  # (scorer id, input) -> its terms
        # per (eval, version) met: (name, type, references, prepared version), one lookup
        self.pairs: dict[
            tuple[int, int], tuple[str | None, str, Sequence[str], _Version | None]
        ] = {}

    def load(self, eval_ids: set[int], pairs: set[tuple[int, int]], runs: set[int]) -> None:
        """Read what these evals, versions and runs need that was not read before."""
        s, text = self.s, self.text
        ids = eval_ids - self.names.keys()
        if ids:
            found = eval_names_types(s, ids)
            self.names.update(
                {i: (text(n), text(t or "similarity")) for i, (n, t) in found.items()}
            )
        pairs = pairs - self.versions.keys()
        if pairs:
            self._load_versions(pairs)
            unnamed = (None, text("similarity"))
            for pair in pairs:
                name, etype = self.names.get(pair[0], unnamed)
                self.pairs[pair] = (name, etype, self.refs.get(pair, ()), self.versions[pair])
        runs = runs - self.status.keys()
        if runs:
            for run in runs_of(s, runs):
                self.status[run.id] = effective_status(run)

    def load_rows(self, rows: list[Row]) -> None:
        """``load`` for run rows."""
        self.load(
            {r.eval_id for r in rows if r.eval_id is not None},
            set(),
            {r.run_row.run_id for r in rows if r.run_row is not None and r.run_row.run_id},
        )

    def _load_versions(self, pairs: set[tuple[int, int]]) -> None:
        found = {
            (v.eval_id, v.version): v for v in versions_of_evals(self.s, {e for e, _ in pairs})
        }
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


_Item = tuple[datetime, int, int, list[Any]]  # (time, kind, id, its rows: tuples or CSV lines)
# (id, input, output, conversation id, metadata, time, packed results) of one capture
_CaptureRow = tuple[int, str, str, str | None, JSONObject | None, datetime, PackedResults]


def _item_key(item: _Item) -> tuple[datetime, int, int]:
    return item[0], item[1], item[2]


def csv_cell(value: object) -> str:
    """``value`` as one cell of the export's CSV, as ``csv.writer`` (this module's dialect:
    minimal quoting, ``"`` doubled, lines ending in ``\n``) writes it: a text with no comma,
    quote or line break as it is, one with any of them quoted. A lone ``\r`` is quoted too,
    which Python 3.11's writer does not do (its reader then refuses the row, and a spreadsheet
    splits it).

    >>> csv_cell("Paris"), csv_cell('say "hi", then'), csv_cell(None), csv_cell(0.5)
    ('Paris', '"say ""hi"", then"', '', '0.5')
    >>> csv_cell("one\\rtwo")
    '"one\\rtwo"'
    """
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)  # csv writes str() of the rest
    if "," in text or '"' in text or "\n" in text or "\r" in text:
        return '"' + text.replace('"', '""') + '"'
    return text


def csv_line(values: Sequence[object]) -> str:
    """One row of the export's CSV, as ``csv.writer`` writes it (``csv_cell``)."""
    return ",".join([csv_cell(v) for v in values]) + "\n"


def _capture_rows(
    s: Tx, f: ResultFilter, look: _Lookups
) -> Iterator[tuple[_CaptureRow, dict[tuple[int, int], Review]]]:
    """Per capture of ``f``'s scope (oldest first), its values and its chunk's reviews: the
    captures' columns read straight from the driver a chunk at a time (``stream_capture_rows``: no
    SQLAlchemy work per row; on PostgreSQL a binary server-side cursor), their results
    unpacked, the names and versions they meet loaded (``look``), the reviews of a chunk read
    at once."""
    q, checked = scope_select(s, capture_scope(f), CAPTURE_COLUMNS)
    parse_time = datetime.fromisoformat
    as_text = gives_text(s)
    for part in stream_capture_rows(s, q, CAPTURE_CHUNK):
        rows: list[_CaptureRow] = []
        for row in part:
            cid, input_, output, conv, meta, at, blob = row[:7]
            if as_text and meta is not None:  # SQLite gives the JSON's text, PostgreSQL its value
                meta = json.loads(meta)
            if checked and not meta_matches(meta, checked):
                continue
            if isinstance(at, str):  # SQLite gives the stored text of the time
                at = parse_time(at)
            rows.append((cid, input_, output, conv, meta, at, unpack_results(blob)))
        pairs = {pair for r in rows for pair in zip(r[6].eval_ids, r[6].versions, strict=True)}
        look.load({e for e, _ in pairs}, pairs, set())
        reviews = capture_reviews(s, [r[0] for r in rows])
        for row in rows:
            yield row, reviews


# per result kept: (eval id, version, automated score, threshold, matched index, automated
# verdict, fingerprint index, review, effective verdict, effective score)
_Entry = tuple[int, int, float, float, int, bool, int, Review | None, bool, float]


def _entries(
    p: PackedResults,
    cid: int,
    reviews: dict[tuple[int, int], Review],
    eval_id: int | None,
    f: ResultFilter,
) -> Iterator[_Entry]:
    """The results of one capture's packed ``p`` that ``f`` keeps (its eval, its verdict and
    review filters; a review's score decides the verdict)."""
    want_review, want_pass = f.reviewed, f.passed
    columns = (p.eval_ids, p.versions, p.scores, p.thresholds, p.matched, p.passed, p.fp_index)
    for eid, version, auto_score, threshold, matched_at, ok, fpi in zip(*columns, strict=True):
        if eval_id is not None and eid != eval_id:
            continue
        review = reviews.get((cid, eid)) if reviews else None
        if review is None:
            if want_review:
                continue
            passed, score = ok != 0, auto_score
        else:
            if want_review is False:
                continue
            passed, score = review.score >= threshold, review.score
        if want_pass is not None and passed != want_pass:
            continue
        yield eid, version, auto_score, threshold, matched_at, ok != 0, fpi, review, passed, score


def _verdict(
    why: _Why, v: _Version | None, refs: Sequence[str], e: _Entry, fp: str
) -> tuple[str, list[str]]:
    """(reasoning, required terms missed) of one kept result ``e``: a passing unreviewed one
    in numbers alone, a failing one explained in bulk (``_Why``)."""
    _, _, _, threshold, matched_at, _, _, review, passed, score = e
    if passed and review is None:
        return f"{score:.2f} ≥ {threshold:.2f}", []
    required: list[str] = []
    missing: list[str] = []
    reason = None
    if not passed and v is not None and refs:
        required, missing, reason = why.of(v, matched_at, fp, review is not None)
    return reason_line(
        score, passed, threshold, review is not None, required, missing, reason
    ), required


def _captured_items(s: Tx, f: ResultFilter, eval_id: int | None, look: _Lookups) -> Iterator[_Item]:
    """Per capture of ``f``'s scope (oldest first), its rows that ``f`` keeps, as tuples in
    ``EXPORT_COLUMNS`` order (the JSON document, ``iter_export_rows``)."""
    unknown = (None, "similarity", (), None)
    for (cid, input_, output, conv, meta, at, p), reviews in _capture_rows(s, f, look):
        at_text = as_utc(at).isoformat()
        why = _Why(input_, output, look.asked)
        fps = p.fingerprints
        out = []
        for e in _entries(p, cid, reviews, eval_id, f):
            eid, version, auto_score, threshold, matched_at, auto, fpi, review, passed, _ = e
            fp = fps[fpi]
            name, etype, refs, v = look.pairs.get((eid, version), unknown)
            line, required = _verdict(why, v, refs, e, fp)
            if review is None:
                reviewed: tuple[object, ...] = (None, None, None)
            else:
                reviewed = (review.score, review.note, as_utc(review.created_at).isoformat())
            out.append(
                (f"{cid}-{eid}", cid, None, None, conv, at_text, name, etype, version,
                 input_, output, auto_score, passed, auto, threshold, *reviewed, fp,
                 refs[matched_at] if matched_at < len(refs) else None,
                 meta, line, ", ".join(required))
            )  # fmt: skip
        if out:
            yield at, 1, cid, out


# an eval version's "name,type," cells, its references' cells, its references, its version
_PairCells = tuple[str, list[str], Sequence[str], "_Version | None"]


def _captured_lines(s: Tx, f: ResultFilter, eval_id: int | None, look: _Lookups) -> Iterator[_Item]:
    """``_captured_items`` as the CSV's lines: what several rows share (a capture's texts,
    time and metadata; an eval version's name and references) made into cells once, a row
    joining them with its own few (``csv_cell``: the bytes ``csv.writer`` writes)."""
    text = look.text
    truth = ("false", "true")
    unknown: _PairCells = ("," + text("similarity") + ",", [], (), None)
    shared: dict[tuple[int, int], _PairCells] = {}
    for (cid, input_, output, conv, meta, at, p), reviews in _capture_rows(s, f, look):
        head = f",{cid},,,{'' if conv is None else csv_cell(text(conv))},{as_utc(at).isoformat()},"
        texts = f"{csv_cell(text(input_))},{csv_cell(text(output))},"
        meta_cell = "" if meta is None else csv_cell(json.dumps(meta, ensure_ascii=False))
        why = _Why(input_, output, look.asked)
        fps = p.fingerprints
        fp_cells = [csv_cell(fp) for fp in fps]
        out = []
        for e in _entries(p, cid, reviews, eval_id, f):
            eid, version, auto_score, threshold, matched_at, auto, fpi, review, passed, _ = e
            pair = (eid, version)
            cells = shared.get(pair)
            if cells is None:
                cells = shared[pair] = _pair_cells(look, pair) or unknown
            pair_cell, ref_cells, refs, v = cells
            line, required = _verdict(why, v, refs, e, fps[fpi])
            if review is None:
                reviewed = ",,,"
            else:
                note = "" if review.note is None else csv_cell(text(review.note))
                reviewed = f"{review.score},{note},{as_utc(review.created_at).isoformat()},"
            ref_cell = ref_cells[matched_at] if matched_at < len(ref_cells) else ""
            lacking = csv_cell(text(", ".join(required))) if required else ""
            out.append(
                f"{cid}-{eid}{head}{pair_cell}{version},{texts}{auto_score},{truth[passed]},"
                f"{truth[auto]},{threshold},{reviewed}{fp_cells[fpi]},{ref_cell},{meta_cell},"
                f"{csv_cell(line)},{lacking}\n"
            )
        if out:
            yield at, 1, cid, out


_to_json = json.JSONEncoder(ensure_ascii=False).encode  # the JSON document's encoder


def _json_float(x: float) -> str:
    """A float as ``_to_json`` writes it (its repr when finite; NaN, Infinity otherwise)."""
    return repr(x) if x - x == 0 else _to_json(x)


def _json_object(values: Sequence[object]) -> str:
    """One row of the JSON document: its ``EXPORT_COLUMNS`` and values as one object."""
    return _to_json(dict(zip(EXPORT_COLUMNS, values, strict=True)))


def _captured_json(s: Tx, f: ResultFilter, eval_id: int | None, look: _Lookups) -> Iterator[_Item]:
    """``_captured_items`` as the JSON document's objects, each the text ``_json_object``
    makes of it: what the rows of a capture or an eval version share encoded once, each row
    joined from the encoded values with its own few."""
    enc, num = _to_json, _json_float
    truth = ("false", "true")
    unknown: tuple[str, list[str], Sequence[str], _Version | None] = (
        '"eval_name": null, "eval_type": "similarity", ',
        [],
        (),
        None,
    )
    shared: dict[tuple[int, int], tuple[str, list[str], Sequence[str], _Version | None]] = {}
    for (cid, input_, output, conv, meta, at, p), reviews in _capture_rows(s, f, look):
        head = (
            f'", "capture_id": {cid}, "run_id": null, "run_status": null, "conversation_id": '
            f'{enc(conv)}, "captured_at": {enc(as_utc(at).isoformat())}, '
        )
        texts = f'"input": {enc(input_)}, "output": {enc(output)}, '
        tail = f', "metadata": {enc(meta)}, "reasoning": '
        why = _Why(input_, output, look.asked)
        fps = p.fingerprints
        fp_json = [enc(fp) for fp in fps]
        out = []
        for e in _entries(p, cid, reviews, eval_id, f):
            eid, version, auto_score, threshold, matched_at, auto, fpi, review, passed, _ = e
            pair = (eid, version)
            found = shared.get(pair)
            if found is None:
                named = look.pairs.get(pair)
                if named is None:
                    found = unknown
                else:
                    name, etype, refs_, v_ = named
                    found = (
                        f'"eval_name": {enc(name)}, "eval_type": {enc(etype)}, ',
                        [enc(r) for r in refs_],
                        refs_,
                        v_,
                    )
                shared[pair] = found
            pair_json, ref_json, refs, v = found
            line, required = _verdict(why, v, refs, e, fps[fpi])
            if review is None:
                reviewed = '"human_override_score": null, "human_override_note": null, '
                reviewed += '"reviewed_at": null'
            else:
                reviewed = (
                    f'"human_override_score": {num(review.score)}, "human_override_note": '
                    f"{enc(review.note)}, "
                    f'"reviewed_at": {enc(as_utc(review.created_at).isoformat())}'
                )
            ref = ref_json[matched_at] if matched_at < len(ref_json) else "null"
            out.append(
                f'{{"result_id": "{cid}-{eid}{head}{pair_json}"eval_version": {version}, '
                f'{texts}"score": {num(auto_score)}, "pass": {truth[passed]}, '
                f'"automated_pass": {truth[auto]}, "threshold": {num(threshold)}, {reviewed}, '
                f'"fingerprint": {fp_json[fpi]}, "matched_reference": {ref}{tail}'
                f'{enc(line)}, "missing_required": {enc(", ".join(required))}}}'
            )
        if out:
            yield at, 1, cid, out


def _pair_cells(look: _Lookups, pair: tuple[int, int]) -> _PairCells | None:
    """An eval version's shared CSV cells: "name,type," and each reference's cell, beside
    its references and prepared version (None when the store knows neither)."""
    found = look.pairs.get(pair)
    if found is None:
        return None
    name, etype, refs, v = found
    return f"{csv_cell(name)},{csv_cell(etype)},", [csv_cell(r) for r in refs], refs, v


def _run_items(rows: Iterator[Row], look: _Lookups, form: str) -> Iterator[_Item]:
    """Per data-set run row, its export row in ``form`` (``_export_values``; their evals'
    names and runs' status read a chunk at a time)."""
    text = look.text
    truth: tuple[str, str] | tuple[bool, bool] = (
        ("false", "true") if form == "csv" else (False, True)
    )
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
                reviewed: tuple[object, ...] = (None, None, None)
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
            shaped = (
                row if form == "rows" else (csv_line(row) if form == "csv" else _json_object(row))
            )
            yield r.created_at, 0, int(r.id[1:]), [shaped]


class ExportService(Part):
    """Results export."""

    def _export_values(self, s: Tx, f: ResultFilter, form: str) -> Iterator[Any]:
        """The rows of ``f``, oldest first, in the order of ``iter_rows``, in ``form``:
        "rows", tuples in ``EXPORT_COLUMNS`` order; "csv", the CSV's lines (texts with
        ``neutralise_formula``, booleans as true/false, metadata as its JSON text); "json",
        the JSON document's objects. Each shared value is made once."""
        eval_id = self._eval_id(s, f)
        look = _Lookups(s, form == "csv")
        if f.run_id is not None:  # one run's rows: no capture
            items: Iterator[_Item] = _run_items(iter_rows(s, f, eval_id, False), look, form)
        else:
            walk = {"csv": _captured_lines, "json": _captured_json}.get(form, _captured_items)
            items = walk(s, f, eval_id, look)
            if not f.captures_only:
                runs = iter_run_rows(s, f, eval_id, newest=False)
                first = next(runs, None)
                if first is not None:
                    run_items = _run_items(chain((first,), runs), look, form)
                    items = heapq.merge(items, run_items, key=_item_key)
        for item in items:
            yield from item[3]

    def iter_export_rows(
        self, where: ResultFilter | None = None, **filters: object
    ) -> Iterator[dict[str, object]]:
        """The results matching ``where`` (or its fields as keywords, as ``list_results``
        takes them) as flat rows (``EXPORT_COLUMNS``), oldest first, streamed: ``score`` is
        the automated score, ``pass`` the effective verdict, ``human_override_*`` the review."""
        f = filter_of(where, filters)
        with self.store.read() as s:
            for values in self._export_values(s, f, "rows"):
                yield dict(zip(EXPORT_COLUMNS, values, strict=True))

    def iter_export(
        self, fmt: str = "csv", where: ResultFilter | None = None, **filters: object
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
            values = self._export_values(s, f, fmt)
            if fmt == "csv":
                csv.writer(buf, lineterminator="\n").writerow(EXPORT_COLUMNS)
                head = buf.getvalue()
                while chunk := list(islice(values, EXPORT_CHUNK)):
                    n += len(chunk)
                    yield n, head + "".join(chunk)
                    head = ""
                if n == 0:
                    yield 0, head
                return
            head = "[\n"
            while chunk := list(islice(values, EXPORT_CHUNK)):
                yield n + len(chunk), head + ",\n".join(chunk)
                head = ",\n"
                n += len(chunk)
            yield n, "\n]\n" if n else "[]\n"

    def write_export(
        self,
        fp: IO[str],
        fmt: str = "csv",
        progress: Callable[[int], None] | None = None,
        where: ResultFilter | None = None,
        **filters: object,
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
        self, fmt: str = "csv", where: ResultFilter | None = None, **filters: object
    ) -> str:
        """The results matching ``where`` (or its fields as keywords) as a CSV or JSON
        document in one string (see ``iter_export_rows`` for the columns). For a large
        selection, ``write_export`` (to a file) or ``iter_export`` (in pieces) hold only a
        piece at a time."""
        return "".join(self.iter_export(fmt, filter_of(where, filters)))
