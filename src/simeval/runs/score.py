"""Scoring a chunk: ``process_chunk``, the unit of work of every executor (inline, a process
pool, Dask), with what the worker keeps between chunks (``simeval.runs.state``).

Every row gets ``score``, ``pass``, ``threshold``, ``matched_index`` (0-based),
``matched_reference`` (the text that matched best), ``missing_terms`` and ``fingerprint``
(and ``eval``, ``eval_version`` when the references come from an eval file). Missing terms
cost more to compute than the score, so the column is filled for failing rows only (passing
rows get an empty list); the summary's worst cases always carry them.

A chunk is scored in three steps: its writers are set up (``_Emit``), its rows go through a
loop (the tight one of ``simeval.runs.plain`` for a plain JSONL run, else the general one
here, which handles every format, eval files, JUnit, baselines and bad rows), and its results
are finished into bytes and bounded statistics (``_finish``). The per-row work stays inside
the loops: a call per row would be a share of the run's time.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Mapping, Sequence
from time import perf_counter

from simeval.datafiles.columns import Chunk, Columns
from simeval.datafiles.read import BadRow, decode, id_cell, reference_cells, text_cell
from simeval.runs.baseline import case_key, case_name
from simeval.runs.config import (
    MAX_NAMED,
    ChunkOut,
    EvalDef,
    RowError,
    RunConfig,
    UnmatchedRow,
    WorstCase,
)
from simeval.runs.encode import (
    ROW_ASCII,
    ROW_TEXT,
    cell_text,
    cut,
    encode_json,
    list_json,
    origin_json,
    result_batch,
    xml_attr,
    xml_text,
)
from simeval.runs.plain import Worst, keep_worst, plain_jsonl
from simeval.runs.state import ChunkState, RunReference, chunk_state
from simeval.scoring.explain import failure_reason, missing_terms
from simeval.scoring.scorer import Scorer

# a row's result as every writer of ``_Emit`` takes it: score, pass, threshold, matched index,
# matched reference, missing terms, fingerprint, eval name
Result = tuple[float, bool, float, int, str, list[str], str, str | None]


# -- one chunk -------------------------------------------------------------------------------
def process_chunk(cfg: RunConfig, chunk: Chunk) -> ChunkOut:
    """Score one chunk: the unit of work of every executor (inline, process pool, Dask).

    Raises ``RowError`` for the first bad row unless ``cfg.on_error == "skip"``.
    """
    state = chunk_state(cfg)
    out = ChunkOut(chunk.index, nbytes=chunk.nbytes)
    emit = _Emit(cfg, chunk, state)
    fast = None
    if (
        chunk.lines is not None
        and emit.jsonl_out
        and state.explainer is not None
        and not (cfg.junit or cfg.keys or cfg.collect is not None or cfg.evals)
    ):
        fast = plain_jsonl(cfg, chunk, state, emit.line_encode)
    if fast is not None:
        out.rows, results, passed, score_sum, emit.lines, missing, worst, stored = fast
        out.store_rows.extend(stored)
    else:
        results, passed, score_sum, missing, worst = _general(cfg, chunk, state, emit, out)
    out.results, out.passed, out.score_sum = results, passed, score_sum
    out.missing = missing
    _finish(cfg, chunk, emit, worst, out)
    return out


class _Emit:
    """Where a chunk's results go, in the results file's format (JSONL lines, CSV text, rows
    of an Arrow table) and in JUnit XML; set up once per chunk."""

    def __init__(self, cfg: RunConfig, chunk: Chunk, state: ChunkState):
        self.jsonl_out = cfg.out_fmt == "jsonl"
        self.parquet_out = cfg.out_fmt == "parquet"
        self.out_fields = cfg.out_fields
        self.n_result_fields = len(cfg.result_fields)
        self.csv_buf: io.StringIO | None = None
        self.csv_row: Callable[[Iterable[object]], object] | None = None
        if cfg.out_fmt in {"csv", "tsv"}:
            self.csv_buf = io.StringIO()
            delimiter = "\t" if cfg.out_fmt == "tsv" else ","
            self.csv_row = csv.writer(
                self.csv_buf, delimiter=delimiter, lineterminator="\n"
            ).writerow
        self.lines: list[str] = []
        self.junit: list[str] = []
        self.table_rows: list[dict[str, object]] = []
        self.take: list[int] = []
        self.batch = chunk.batch is not None  # a Parquet chunk: its rows are taken as they are
        self.classnames: dict[str | None, str] = {None: xml_attr(cfg.source)}
        self.classnames.update({e.name: xml_attr(f"{cfg.source} [{e.name}]") for e in cfg.evals})
        # a JSONL row is written as its own fields followed by the result's: when none of its
        # fields has a result field's name, the row is encoded as it is and the result's
        # fields are appended as text (the reference's JSON made once per reference); an
        # ASCII line without \u escapes holds only ASCII text, which the (faster) ASCII
        # encoder writes byte for byte as the other would
        self.result_names = frozenset(cfg.result_fields)
        self.line_encode: Callable[[object], str] = encode_json
        if chunk.lines is not None:
            lines = chunk.lines
            plain_ascii = all(map(bytes.isascii, lines)) and not any(b"\\u" in x for x in lines)
            self.line_encode = ROW_ASCII if plain_ascii else ROW_TEXT
        self.threshold_json = encode_json(cfg.threshold)
        scorer = state.scorer
        self.fingerprint_json = "" if scorer is None else encode_json(scorer.fingerprint)

    def jsonl(
        self,
        row: dict[str, object],
        ref: RunReference,
        result: Result,
        eval_def: EvalDef | None,
    ) -> None:
        """A results line: the row with ``result`` after its fields. ``result`` is (score,
        pass, threshold, matched index, matched reference, missing terms, fingerprint, eval
        name), as every writer of ``_Emit`` takes it."""
        score, passed, threshold, at, reference, missing, fingerprint, eval_name = result
        if not self.result_names.isdisjoint(row):
            # the input row with the result fields after its own (or in place of fields of
            # the same name): {**row, **result} without building either
            row["score"] = score
            row["pass"] = passed
            row["threshold"] = threshold
            row["matched_index"] = at
            row["matched_reference"] = reference
            row["missing_terms"] = missing
            row["fingerprint"] = fingerprint
            if eval_def is not None:
                row["eval"] = eval_name
                row["eval_version"] = eval_def.version
            self.lines.append(encode_json(row))
            return
        head = self.line_encode(row)
        encode = encode_json
        if eval_def is not None:
            tail = (
                f', "fingerprint": {encode(fingerprint)}, "eval": {encode(eval_name)}, '
                f'"eval_version": {encode(eval_def.version)}}}'
            )
            threshold_text = encode(threshold)
        else:
            tail = f', "fingerprint": {self.fingerprint_json}}}'
            threshold_text = self.threshold_json
        self.lines.append(
            f'{head[:-1]}{", " if len(head) > 2 else ""}"score": '
            f"{repr(score) if score.__class__ is float else encode(score)}, "
            f'"pass": {"true" if passed else "false"}, "threshold": {threshold_text}, '
            f'"matched_index": {at}, "matched_reference": {ref.encoded()}, '
            f'"missing_terms": {list_json(missing)}{tail}'
        )

    def csv(self, row: dict[str, object], result: Result, eval_def: EvalDef | None) -> None:
        """A results row of a CSV/TSV file: the input's fields, then the result's."""
        assert self.csv_row is not None
        cells = (*result, None if eval_def is None else eval_def.version)
        self.csv_row(
            [cell_text(row.get(f)) for f in self.out_fields]
            + [cell_text(v) for v in cells[:5]]
            + ["; ".join(result[5])]
            + [cell_text(v) for v in cells[6 : self.n_result_fields]]
        )

    def table(
        self, row: dict[str, object], index: int, result: Result, eval_def: EvalDef | None
    ) -> None:
        """A results row of a Parquet file (``index``: the row in the chunk's batch)."""
        score, passed, threshold, at, reference, missing, fingerprint, eval_name = result
        result_d: dict[str, object] = {
            "score": score,
            "pass": passed,
            "threshold": threshold,
            "matched_index": at,
            "matched_reference": reference,
            "missing_terms": missing,
            "fingerprint": fingerprint,
        }
        if eval_def is not None:
            result_d["eval"] = eval_name
            result_d["eval_version"] = eval_def.version
        if self.batch:
            self.take.append(index)
            self.table_rows.append(result_d)
        else:
            own = {f: cell_text(row.get(f)) if f in row else None for f in self.out_fields}
            self.table_rows.append({**own, **result_d})

    def case(self, where: str, name: str, result: Result, output: str, seconds: float) -> None:
        """A JUnit test case of a result (a failure with the score and missing terms) that
        took ``seconds``."""
        score, passed, threshold, _, reference, missing, _, eval_name = result
        case = (
            f"<testcase classname={self.classnames[eval_name]} name={xml_attr(name)} "
            f'time="{seconds:.6f}">'
        )
        if not passed:
            msg = f"score {score:.4f} < threshold {threshold:.2f}"
            detail = (
                f"{where}\nscore: {score:.6f}\nthreshold: {threshold}\n"
                f"missing terms: {', '.join(missing) or '-'}\n"
                f"output: {cut(output)}\nreference: {cut(reference)}"
            )
            case += (
                f'<failure message={xml_attr(msg)} type="below-threshold">'
                f"{xml_text(detail)}</failure>"
            )
        self.junit.append(case + "</testcase>\n")

    def bad_row(self, where: str, bad: BadRow, seconds: float) -> None:
        """A JUnit test case in error for a bad row that was skipped (after ``seconds``: an
        engine's call that failed)."""
        self.junit.append(
            f"<testcase classname={self.classnames[None]} name={xml_attr(where)} "
            f'time="{seconds:.6f}">'
            f"<error message={xml_attr(str(bad))}/></testcase>\n"
        )


def _cells(
    row: Mapping[str, object], cols: Columns, collect: str | None
) -> tuple[str, str | None, str | None, object]:
    """The output, input, case id and label (the ``collect`` column) of a row."""
    if row.get(cols.output) is None and isinstance(row.get("engine_error"), str):
        # an engine run's case that its engine could not answer (simeval.runs.answering)
        raise BadRow(row["engine_error"])
    output = text_cell(row, cols.output, True)
    assert output is not None
    text_in = text_cell(row, cols.input, cols.input_required)
    case_id = id_cell(row, cols)
    collected: object = None
    if collect is not None:
        if collect not in row or row[collect] is None:
            raise BadRow(f"missing label column {collect!r}")
        collected = row[collect]
    return output, text_in, case_id, collected


def _latency_s(row: object, column: str | None) -> float:
    """A row's engine time in seconds (its ``column`` of milliseconds), 0 when none."""
    if column is None or not isinstance(row, dict):
        return 0.0
    ms = row.get(column)
    return ms / 1000 if isinstance(ms, int | float) and ms > 0 else 0.0


def _count(per_eval: dict[str, list[float]], name: str, passed: bool, score: float) -> None:
    """One more result of eval ``name``: its results, passed and score sum."""
    stats = per_eval.get(name)
    if stats is None:
        stats = per_eval[name] = [0, 0, 0.0]
    stats[0] += 1
    stats[1] += passed
    stats[2] += score


def _plain_hit(
    state: ChunkState, scorer: Scorer, output: str, refs: Sequence[str], text_in: str | None
) -> tuple[list[tuple[int, float, int, Scorer]], bytes, bytes, list[RunReference]]:
    """A row without eval files scored against its own references: the one hit, the output's
    vector, the question's terms and the prepared references."""
    vec = scorer.vector(output)
    rs = [state.ref(r) for r in refs]
    prepared = [r.vec for r in rs]
    asked = state.input_terms(scorer, text_in)
    if vec and all(prepared):
        score, at = scorer.best_vector(vec, prepared, asked, scorer.asks(text_in), output, refs)
    else:  # an empty vector: score_detail decides (identical texts without terms)
        score, at = scorer.score_detail(output, refs, text_in)
    return [(-1, score, at, scorer)], vec, asked, rs


def _general(
    cfg: RunConfig, chunk: Chunk, state: ChunkState, emit: _Emit, out: ChunkOut
) -> tuple[int, int, float, list[str], Worst]:
    """The chunk's rows by the general loop (any format, eval files, bad rows, JUnit, the
    keys of a baseline): results, passed, score sum, missing terms named, the worst."""
    cols, evals, scorer = cfg.columns, cfg.evals, state.scorer
    top, collect, worst_n = cfg.top_missing, cfg.collect, cfg.worst
    skip, want_junit, want_keys, want_store = cfg.on_error == "skip", cfg.junit, cfg.keys, cfg.store
    jsonl_out, csv_out, parquet_out = emit.jsonl_out, emit.csv_row is not None, emit.parquet_out
    worst: Worst = []
    missing_words: list[str] = []  # tallied once per chunk, in the same order
    per_eval, store_rows = out.per_eval, out.store_rows
    rowvecs: dict[
        int, tuple[bytes, set[int]]
    ] = {}  # a row's output vector and terms per scorer: evals share them
    rs: list[RunReference] = []
    results = passed_n = seq = 0
    score_sum = 0.0
    started = 0.0
    for index, (where, ordinal, row) in enumerate(decode(cfg, chunk)):
        out.rows += 1
        if want_junit:
            started = perf_counter()
        try:
            if isinstance(row, BadRow):
                raise row
            output, text_in, case_id, collected = _cells(row, cols, collect)
            if evals:
                hits = state.hits(output, case_id, text_in)
                if not hits:
                    out.unmatched += 1
                    if len(out.unmatched_rows) < MAX_NAMED:
                        out.unmatched_rows.append(UnmatchedRow(where, case_id, cut(text_in)))
                    continue
                refs: Sequence[str] = ()
            else:
                refs = reference_cells(row, cols)
        except BadRow as bad:
            if not skip:
                raise RowError(where, str(bad)) from None
            out.errors.append((where, str(bad)))
            if want_junit:
                took = perf_counter() - started + _latency_s(row, cfg.latency)
                emit.bad_row(where, bad, took)
            continue
        vec = asked = b""  # asked: the terms of the row's input (the question) count less
        if not evals:
            assert scorer is not None
            hits, vec, asked, rs = _plain_hit(state, scorer, output, refs, text_in)
        else:
            rowvecs.clear()
        for pos, score, at, sc in hits:
            eval_def = evals[pos] if pos >= 0 else None
            threshold = cfg.threshold if eval_def is None else eval_def.threshold
            if eval_def is not None:
                refs = eval_def.references
            # a required term missing fails the row whatever its score, and is named first
            lacks = state.lacks(sc, output, rowvecs, None if eval_def is not None else vec)
            passed = score >= threshold and not lacks
            if passed:
                missing: list[str] = []
            else:
                if eval_def is not None:
                    missing = state.missing(pos, sc, output, at, rowvecs, top, text_in)
                else:
                    missing = state.plain_missing(rs[at], output, vec, asked, top, text_in)
                if lacks:
                    missing = lacks + [m for m in missing if m not in lacks]
                missing_words.extend(missing)
            reference = refs[at]
            results += 1
            passed_n += passed
            score_sum += score
            eval_name = None
            if eval_def is not None:
                eval_name = eval_def.name
                _count(per_eval, eval_name, passed, score)
            if worst_n:
                # a later result with an equal score ranks after an earlier one: only a lower
                # score displaces the current last of the worst
                if len(worst) < worst_n or score < -worst[0][0]:
                    entry = (where, case_id, text_in, output, score, passed, threshold,
                             eval_name, at, missing, reference, sc)  # fmt: skip
                    keep_worst(worst, worst_n, (-score, -seq, entry))
                seq += 1
            result = (score, passed, threshold, at, reference, missing, sc.fingerprint, eval_name)
            if jsonl_out:
                ref = rs[at] if eval_def is None else state.eval_ref(pos, at, sc)
                emit.jsonl(row, ref, result, eval_def)
            elif csv_out:
                emit.csv(row, result, eval_def)
            elif parquet_out:
                emit.table(row, index, result, eval_def)
            if want_junit or want_keys:
                name = case_name(case_id, text_in, where)
                if want_junit:
                    # the row's wall time: its engine call and its scoring (evals of one
                    # row share both)
                    took = perf_counter() - started + _latency_s(row, cfg.latency)
                    emit.case(where, name, result, output, took)
                if want_keys:
                    key = case_key(case_id, text_in, ordinal, eval_name)
                    out.cases.append((key, score, passed, name, missing))
            if want_store:
                # no explanation here: it is computed when the row is shown, from the row's
                # own texts and the scorer options the run keeps; the row keeps where it came
                # from (a stored run can be a later run's baseline)
                store_rows.append(
                    (eval_name, None if eval_def is None else eval_def.version, score, passed,
                     threshold, sc.fingerprint, at, text_in, output, reference,
                     f'{{"case": {origin_json(case_id, where, ordinal)}}}')
                )  # fmt: skip
            if collected is not None:
                out.collected.append((where, collected, score))
    return results, passed_n, score_sum, missing_words, worst


def _finish(cfg: RunConfig, chunk: Chunk, emit: _Emit, worst: Worst, out: ChunkOut) -> None:
    """The chunk's worst cases (with their missing terms) and its results as bytes."""
    for _, _, entry in sorted(worst, reverse=True):
        where, case_id, text_in, output, score, passed, threshold, eval_name = entry[:8]
        at, missing, reference, sc = entry[8:]
        if passed:  # a passing row among the worst: its terms were not computed yet
            missing = missing_terms(sc, output, reference, cfg.top_missing, text_in)
        reason = None if passed else failure_reason(sc, output, reference, text_in)
        case = WorstCase(where, case_id, cut(text_in), cut(output), score, passed, threshold,
                         eval_name, at, missing, reason)  # fmt: skip
        out.worst.append(case)
    if emit.lines:
        emit.lines.append("")
        # line by line: one line with a character beyond Latin-1 would make the whole
        # chunk's joined text a wide string, whose encoding is ~5x slower than these copies
        to_bytes = str.encode
        out.data = b"\n".join([to_bytes(x, "utf-8", "surrogateescape") for x in emit.lines])
    elif emit.csv_buf is not None:
        out.data = emit.csv_buf.getvalue().encode("utf-8", "surrogateescape")
    elif emit.table_rows:
        out.batch = result_batch(cfg, chunk, emit.take, emit.table_rows)
    if emit.junit:
        out.junit = "".join(emit.junit).encode("utf-8")
