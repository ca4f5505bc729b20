"""The text of results: JSON lines, CSV cells, JUnit XML, Arrow batches, a stored row's origin.

A worker writes its chunk's results here, as bytes the run's process only copies out. The
JSON encoders are the standard library's C ones, built once (``row_encoder``): a results line
is the input row's JSON followed by the result's fields, written as ``json.dumps`` would.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from simeval.datafiles.columns import Chunk
from simeval.runs.config import RunConfig

TEXT_CUT = 300  # characters of input/output kept in the summary's worst cases and JUnit
# ``json.dumps(x, ensure_ascii=False, default=str)`` and ``json.dumps(x)``
encode_json: Callable[[object], str] = json.JSONEncoder(ensure_ascii=False, default=str).encode
encode_ascii: Callable[[object], str] = json.JSONEncoder().encode
string_json: Callable[[str], str] = json.encoder.encode_basestring
string_ascii: Callable[[str], str] = json.encoder.encode_basestring_ascii
# json.loads' own (C) scanner, without its Python frames: (value, end) of the text at an index
scan_json: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
JSON_WS = " \t\n\r"
_XML_BAD = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def row_encoder(ascii_only: bool) -> Callable[[object], str]:
    """``encode_ascii`` or ``encode_json`` for a decoded JSON row: the same C encoder
    ``JSONEncoder.encode`` builds on every call, built once (no cycle check: a decoded row has
    no cycles)."""
    from json import encoder as je

    make = getattr(je, "c_make_encoder", None)
    if make is None:
        return encode_ascii if ascii_only else encode_json
    if ascii_only:
        enc = make(None, json.JSONEncoder().default, je.encode_basestring_ascii, None,
                   ": ", ", ", False, False, True)  # fmt: skip
    else:
        enc = make(None, str, je.encode_basestring, None, ": ", ", ", False, False, True)
    join = "".join
    return lambda o: join(enc(o, 0))


ROW_ASCII = row_encoder(True)
ROW_TEXT = row_encoder(False)


def list_json(words: list[str]) -> str:
    """``encode_json(words)`` for a list of strings."""
    return "[" + ", ".join(map(string_json, words)) + "]" if words else "[]"


def origin_json(case_id: str | None, where: str, ordinal: int) -> str:
    """``encode_ascii({"id": case_id, "row": where, "ordinal": ordinal})``: where a stored
    row came from (a stored run can be a later run's baseline)."""
    cid = "null" if case_id is None else string_ascii(case_id)
    return f'{{"id": {cid}, "row": {string_ascii(where)}, "ordinal": {ordinal}}}'


def xml_text(text: str) -> str:
    """Text for an XML element: escaped, characters XML cannot hold replaced."""
    from xml.sax.saxutils import escape

    return escape(_XML_BAD.sub("\ufffd", text))


def xml_attr(text: str) -> str:
    """A quoted XML attribute value (see ``xml_text``)."""
    from xml.sax.saxutils import quoteattr

    return quoteattr(_XML_BAD.sub("\ufffd", text))


def cut(text: str | None) -> str | None:
    """``text`` cut to ``TEXT_CUT`` characters (with "..." when cut)."""
    if text is None or len(text) <= TEXT_CUT:
        return text
    return text[: TEXT_CUT - 3] + "..."


def cell_text(value: object) -> str:
    """A value as one CSV cell: text as is, anything else as JSON (lists stay parseable)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False, default=str)


def result_types() -> dict[str, Any]:
    """The Arrow type of each result column."""
    import pyarrow as pa

    return {
        "score": pa.float64(),
        "pass": pa.bool_(),
        "threshold": pa.float64(),
        "matched_index": pa.int32(),
        "matched_reference": pa.string(),
        "missing_terms": pa.list_(pa.string()),
        "fingerprint": pa.string(),
        "eval": pa.string(),
        "eval_version": pa.int64(),
    }


def result_batch(
    cfg: RunConfig, chunk: Chunk, take: list[int], rows: list[dict[str, object]]
) -> Any:
    """An Arrow record batch of a chunk's results: the input's columns (the rows ``take`` of
    a Parquet chunk, else ``cfg.out_fields`` of ``rows``) and the result columns."""
    import pyarrow as pa

    types = result_types()
    fields = cfg.result_fields
    if chunk.batch is not None:
        base = chunk.batch.take(pa.array(take, pa.int64()))
        keep = [n for n in base.schema.names if n not in fields]
        arrays = [base.column(n) for n in keep]
        names = list(keep)
    else:
        arrays, names = [], []
        for f in cfg.out_fields:
            if f not in fields:
                arrays.append(pa.array([r.get(f) for r in rows], pa.string()))
                names.append(f)
    for f in fields:
        arrays.append(pa.array([r[f] for r in rows], types[f]))
        names.append(f)
    return pa.RecordBatch.from_arrays(arrays, names=names)
