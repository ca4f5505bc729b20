"""The tight loop of a plain run: a JSONL chunk scored against its reference column and
written to a JSONL results file, with none of the general loop's per-row choices.

It covers the common row (a JSON object with a text output, one non-blank text reference, an
optional text input and a text or integer id, no result field's name among its keys,
scorable terms on both sides) and gives up (None) at the first row that is anything else:
the general loop (``simeval.runs.score``) then takes the whole chunk, so whatever it does
with such rows (an error, a skip, another path) stays its own. Both write the same lines,
statistics, worst cases and stored rows (``tests/runs/test_stored_rows.py`` holds it).
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from simeval.datafiles.columns import Chunk
from simeval.runs.config import RunConfig
from simeval.runs.encode import JSON_WS, encode_json, list_json, origin_json, scan_json
from simeval.runs.state import ChunkState

if TYPE_CHECKING:
    from simeval.scoring.scorer import Scorer

# a JSON escape that may stand for a NUL or a (lone) surrogate, which no database stores
_SUSPECT = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])").search

# a worst case as a loop keeps it until its chunk ends (``score._finish`` reads it): where,
# case id, input, output, score, passed, threshold, eval name, matched index, missing terms,
# matched reference, scorer
WorstEntry = tuple[
    str, str | None, str | None, str, float, bool, float, str | None, int, list[str], str, "Scorer"
]
Worst = list[tuple[float, int, WorstEntry]]  # a heap on (-score, -order): see ``keep_worst``

# what the loop gives back: rows, results, passed, score sum, result lines, missing terms
# named (in row order), the worst entries (a heap, see ``ChunkState``), rows to store
PlainOut = tuple[
    int,
    int,
    int,
    float,
    list[str],
    list[str],
    Worst,
    list[tuple[object, ...]],
]


def plain_jsonl(
    cfg: RunConfig, chunk: Chunk, state: ChunkState, line_encode: Callable[[object], str]
) -> PlainOut | None:
    """The chunk's results by the tight loop, or None when a row needs the general loop (or
    the run's columns do: several reference columns, a required input or id)."""
    cols = cfg.columns
    if len(cols.references) != 1 or cols.input_required or cols.id_required:
        return None
    if state.scorer is not None and state.scorer.options.get("required"):
        return None  # required terms (``--require``): the general loop checks them
    assert chunk.lines is not None
    try:
        return _rows(cfg, chunk.lines, chunk.start, chunk.ordinal, state, line_encode)
    except Exception:  # anything unusual: the general loop decides (and names the problem)
        return None


def keep_worst(worst: Worst, n: int, item: tuple[float, int, WorstEntry]) -> None:
    """Put ``item`` on the heap of the ``n`` worst results (the caller checked it is one)."""
    if len(worst) < n:
        heapq.heappush(worst, item)
    else:
        heapq.heapreplace(worst, item)


def _rows(
    cfg: RunConfig,
    lines_in: list[bytes],
    start: int,
    ordinal: int,
    state: ChunkState,
    line_encode: Callable[[object], str],
) -> PlainOut | None:
    scorer = state.scorer
    assert scorer is not None and state.explainer is not None
    cols = cfg.columns
    out_col, ref_col, in_col, id_col = cols.output, cols.references[0], cols.input, cols.id
    isdisjoint = frozenset(cfg.result_fields).isdisjoint
    scan, ws, vector, best = scan_json, JSON_WS, scorer.vector, scorer.best_vector
    asked_by, refs_cache, get_ref = state.plain_inputs, state.refs, state.ref
    threshold, top, worst_n, want_store = cfg.threshold, cfg.top_missing, cfg.worst, cfg.store
    missing_of = state.explainer.missing_of
    fingerprint = scorer.fingerprint
    tail = f', "fingerprint": {encode_json(fingerprint)}}}'
    mid = f', "threshold": {encode_json(threshold)}, "matched_index": '
    where_prefix = f"{cfg.source} line "
    lines: list[str] = []
    append = lines.append
    missing_words: list[str] = []
    extend = missing_words.extend
    worst: Worst = []
    store_rows: list[tuple[object, ...]] = []
    nothing: list[str] = []
    rows = passed_n = seq = 0
    score_sum = 0.0
    str_, int_, float_ = str, int, float
    for i, line in enumerate(lines_in):
        if line[:1] != b"{":
            if not line.strip():
                continue  # a blank line: no row
            return None
        if b"\\u" in line and _SUSPECT(line):
            return None  # a NUL or a surrogate escape: the general loop checks the texts
        text = line.decode("utf-8")
        row, end = scan(text, 0)
        if end != len(text) and text[end:].strip(ws):
            return None
        if row.__class__ is not dict or not isdisjoint(row):
            return None
        output, reference = row.get(out_col), row.get(ref_col)
        text_in, case_id = row.get(in_col), row.get(id_col)
        if output.__class__ is not str_ or reference.__class__ is not str_:
            return None
        if text_in is not None and text_in.__class__ is not str_:
            return None
        if case_id is not None:
            if case_id.__class__ is int_:
                case_id = str_(case_id)
            elif case_id.__class__ is not str_:
                return None
        ref = refs_cache.get(reference)
        if ref is None:
            if not reference.strip():
                return None
            ref = get_ref(reference)
        vec = vector(output)
        if not vec or not ref.vec:
            return None
        asked = b""
        if text_in is not None:
            got = asked_by.get(text_in)
            asked = got if got is not None else state.plain_input_terms(text_in)
        score, at = best(vec, [ref.vec], asked, scorer.asks(text_in), output, [reference])
        if score.__class__ is not float_:
            return None
        rows += 1
        score_sum += score
        passed = score >= threshold
        if passed:
            missing = nothing
            passed_n += 1
        else:
            missing = missing_of(ref, vec, asked, top)
            extend(missing)
        if worst_n:
            if len(worst) < worst_n or score < -worst[0][0]:
                entry = (where_prefix + str_(start + i), case_id, text_in, output, score, passed,
                         threshold, None, at, missing if missing is not nothing else [],
                         reference, scorer)  # fmt: skip
                keep_worst(worst, worst_n, (-score, -seq, entry))
            seq += 1
        # a line of printable ASCII without a backslash holds strings whose JSON is their
        # text in quotes (no character of them needs an escape, and the scanner refused
        # control characters): the row's JSON is then its pieces joined, as the encoder
        # would write them, without scanning every string for escapes again
        head = ""
        if line.isascii() and b"\\" not in line and b"\x7f" not in line:
            pieces = []
            for k, v in row.items():
                c = v.__class__
                if c is str_:
                    pieces.append(f'"{k}": "{v}"')
                elif c is int_:
                    pieces.append(f'"{k}": {int_.__repr__(v)}')
                elif v is None:
                    pieces.append(f'"{k}": null')
                else:
                    break
            else:
                head = "{" + ", ".join(pieces) + "}"
        if not head:
            head = line_encode(row)
        append(
            f'{head[:-1]}{", " if len(head) > 2 else ""}"score": {score!r}, "pass": '
            f'{"true" if passed else "false"}{mid}{at}, "matched_reference": '
            f'{ref.encoded()}, "missing_terms": {list_json(missing)}{tail}'
        )
        if want_store:
            where = where_prefix + str_(start + i)
            store_rows.append(
                (None, None, score, passed, threshold, fingerprint, at, text_in, output,
                 reference, f'{{"case": {origin_json(case_id, where, ordinal)}}}')
            )  # fmt: skip
        ordinal += 1
    return rows, rows, passed_n, score_sum, lines, missing_words, worst, store_rows
