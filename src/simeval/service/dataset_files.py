"""Dataset cases in and out of files, and the check of one case.

A dataset file has the columns ``simeval run`` reads (it is read by the same reader,
``simeval.datafiles.read``): ``id`` (optional: the row's number), ``input``, ``reference`` or
``references`` (a text, or in JSONL and Parquet a list of texts; more columns
``reference_2``, ``reference_3``... add answers), an optional ``metadata`` (an object; in
CSV a JSON object as text) and an optional ``draft`` (true for a reference not yet checked
by a person). Every other column goes into the case's metadata, so nothing in the file is
dropped. ``export_lines`` writes the same columns back, so an export imports again unchanged.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from simeval.checks import MAX_NAME_CHARS, check_json_value, check_storable, check_text_size
from simeval.csvcells import neutralise_formula, restore_formula
from simeval.datafiles.columns import Columns, FileSource, detect_format
from simeval.datafiles.read import (
    BadRow,
    decode,
    id_cell,
    input_fields,
    read_chunks,
    reference_cells,
    text_cell,
    type_name,
)
from simeval.errors import InvalidInput, InvalidType, SimevalError
from simeval.jsontypes import JSONObject

EXPORT_FORMATS = ("jsonl", "csv")
_NUMBERED = re.compile(r"^reference_([2-9]|[1-9]\d{1,2})$")
_BUILT_IN = {"id", "input", "reference", "references", "metadata", "draft"}
_TRUE = {"true", "1", "yes"}
_FALSE = {"false", "0", "no", ""}


def check_case_id(value: object, what: str = "case id") -> str:
    """A case id as stored: a string (an integer is taken as its digits), stripped, 1-200
    characters, storable."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise InvalidType(f"{what} must be a string, not {type_name(value)}")
    clean = value.strip()
    if not clean:
        raise InvalidInput(f"{what} is empty")
    if len(clean) > MAX_NAME_CHARS:
        raise InvalidInput(f"{what} is longer than {MAX_NAME_CHARS} characters")
    return check_storable(clean, what)


def check_references(value: object) -> list[str]:
    """One or more non-empty reference answers (one string is a list of one)."""
    refs = [value] if isinstance(value, str) else value
    if not isinstance(refs, list) or not refs:
        raise InvalidInput("references must be a non-empty list of texts (or one text)")
    for i, ref in enumerate(refs):
        label = "reference answer" if len(refs) == 1 else f"reference answer {i + 1}"
        if not isinstance(ref, str):
            raise InvalidType(f"{label} must be a string, not {type_name(ref)}")
        if not ref.strip():
            raise InvalidInput(f"{label} is empty")
        check_text_size(ref, label)
        check_storable(ref, label)
    return list(refs)


def check_input(value: object) -> str:
    """A case's input: a text the store can hold (it may be empty)."""
    if not isinstance(value, str):
        raise InvalidType(f"input must be a string, not {type_name(value)}")
    check_text_size(value, "input")
    return check_storable(value, "input")


def check_metadata(value: object) -> JSONObject:
    """A case's metadata: a JSON object (None is none)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidType(f"metadata must be an object, not {type_name(value)}")
    check_json_value(value, "metadata")
    return value


def check_case(obj: object, default_id: str | None = None) -> dict[str, Any]:
    """A case given as an object (``id``, ``input``, ``references`` or ``reference``,
    ``metadata``, ``draft``) checked: the dict stored. ``default_id`` when it has no id."""
    if not isinstance(obj, dict):
        raise InvalidType(f"a case must be an object, not {type_name(obj)}")
    unknown = sorted(set(obj) - _BUILT_IN)
    if unknown:
        raise InvalidInput(f"a case has unknown fields: {', '.join(unknown)}")
    if "references" in obj and "reference" in obj:
        raise InvalidInput("a case has both reference and references; give one")
    raw_id = obj.get("id", default_id)
    if raw_id is None:
        raise InvalidInput("a case needs an id")
    draft = obj.get("draft", False)
    if not isinstance(draft, bool):
        raise InvalidType(f"draft must be true or false, not {type_name(draft)}")
    return {
        "id": check_case_id(raw_id),
        "input": check_input(obj.get("input")),
        "references": check_references(obj.get("references", obj.get("reference"))),
        "metadata": check_metadata(obj.get("metadata")),
        "draft": draft,
    }


# -- reading a file --------------------------------------------------------------------------
def _reference_columns(keys: Iterable[str]) -> tuple[str, ...]:
    keys = list(keys)
    named = [k for k in ("reference", "references") if k in keys]
    numbered = sorted((k for k in keys if _NUMBERED.match(k)), key=lambda k: int(k[10:]))
    return tuple(named + numbered)


def _metadata_cell(value: object) -> JSONObject:
    if value is None:
        return {}
    if isinstance(value, str):  # CSV: a JSON object as text
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except ValueError:
            raise BadRow("column 'metadata' must hold a JSON object") from None
    if not isinstance(value, dict):
        raise BadRow(f"column 'metadata' must be an object, not {type_name(value)}")
    return value


def _draft_cell(value: object) -> bool:
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise BadRow(f"column 'draft' must be true or false, not {type_name(value)}")


def _row_case(row: dict[str, object], ordinal: int) -> dict[str, Any]:
    refs = _reference_columns(row)
    if not refs:
        have = ", ".join(map(str, row)) or "none"
        raise BadRow(f"missing column 'reference' or 'references' (columns: {have})")
    cols = Columns(references=refs, input="input", id="id", input_required=True)
    case_id = id_cell(row, cols)
    # extra columns join it as they were read (any cell a file holds; checked with the case)
    meta = dict[str, object](_metadata_cell(row.get("metadata")))
    for key, value in row.items():
        if key not in _BUILT_IN and key not in refs and value is not None:
            meta.setdefault(str(key), value)  # an extra column: kept as metadata
    case = {
        "id": case_id if case_id is not None else str(ordinal + 1),
        "input": text_cell(row, "input", True),
        "references": reference_cells(row, cols),
        "metadata": meta,
        "draft": _draft_cell(row.get("draft")),
    }
    try:
        return check_case(case)
    except SimevalError as exc:
        raise BadRow(str(exc)) from None


def read_cases(
    path: str, fmt: str | None = None, quoting: bool = True, label: str | None = None
) -> list[dict[str, Any]]:
    """Every case of a dataset file (JSONL, CSV/TSV or Parquet, read as ``simeval run`` reads
    it), checked. ``InvalidInput`` names the file (``label``, default ``path``: an upload's
    temporary file is no name to show) and the line (or row) of the first bad one, including
    a case id seen before."""
    try:
        return _read_cases(path, detect_format(path, fmt), quoting, label or path)
    except InvalidInput as exc:
        message = str(exc) if label is None else str(exc).replace(path, label)
        raise type(exc)(_printable(message)) from None


def _printable(message: str) -> str:
    """``message`` with the bytes a non-UTF-8 file left as lone surrogates (the reader's
    ``surrogateescape``, e.g. in a header it names) written as ``\\xNN``: no JSON answer or
    terminal can carry a lone surrogate."""
    return (
        "".join(f"\\x{ord(c) - 0xDC00:02x}" if "\udc80" <= c <= "\udcff" else c for c in message)
        .encode("utf-8", "backslashreplace")
        .decode("utf-8")
    )


def _read_cases(path: str, fmt: str, quoting: bool, label: str) -> list[dict[str, Any]]:
    header = input_fields(path, fmt, quoting) if fmt in {"csv", "tsv"} else ()
    cfg = FileSource(source=label, fmt=fmt, header=tuple(header), quoting=quoting)
    cases: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for chunk in read_chunks(path, fmt, quoting=quoting):
        for where, ordinal, row in decode(cfg, chunk):
            try:
                if isinstance(row, BadRow):
                    raise row
                if header:  # a CSV/TSV file: its cells as a CSV export neutralised them
                    row = {
                        k: restore_formula(v) if isinstance(v, str) else v for k, v in row.items()
                    }
                case = _row_case(row, ordinal)
            except BadRow as exc:
                raise InvalidInput(f"{where}: {exc}") from None
            if case["id"] in seen:
                raise InvalidInput(
                    f"{where}: case id {case['id']!r} is also at {seen[case['id']]}; "
                    "a case id must be unique"
                )
            seen[case["id"]] = where
            cases.append(case)
    if not cases:
        raise InvalidInput(f"{label}: the file has no cases")
    return cases


# -- writing cases ---------------------------------------------------------------------------
def export_lines(cases: Iterable[dict[str, Any]], fmt: str, most_refs: int) -> Iterator[str]:
    """The cases as JSONL lines or CSV rows (a header first), the columns ``read_cases``
    reads: ``reference`` (a text, or in JSONL a list for several), in CSV ``reference_2``...
    up to ``most_refs`` and ``metadata`` as JSON text; ``draft`` when a case is one."""
    if fmt not in EXPORT_FORMATS:
        raise InvalidInput(f"unknown export format {fmt!r}; use jsonl or csv")
    if fmt == "jsonl":
        for case in cases:
            refs = case["references"]
            row: dict[str, object] = {
                "id": case["id"],
                "input": case["input"],
                "reference": refs[0] if len(refs) == 1 else refs,
            }
            if case["metadata"]:
                row["metadata"] = case["metadata"]
            if case["draft"]:
                row["draft"] = True
            yield json.dumps(row, ensure_ascii=False) + "\n"
        return
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    quoted = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL)
    ref_cols = ["reference"] + [f"reference_{i}" for i in range(2, max(most_refs, 1) + 1)]
    writer.writerow(["id", "input", *ref_cols, "metadata", "draft"])
    for case in cases:
        refs = case["references"] + [""] * (len(ref_cols) - len(case["references"]))
        meta = json.dumps(case["metadata"], ensure_ascii=False) if case["metadata"] else ""
        texts = [*map(neutralise_formula, [case["id"], case["input"], *refs, meta])]
        cells = [*texts, "true" if case["draft"] else "false"]
        # csv quotes a cell with "\n" but not one with a lone "\r" (which a reader takes for a
        # line end): such a row is written with every cell quoted
        (quoted if any("\r" in t for t in texts) else writer).writerow(cells)
        yield buf.getvalue()
        buf.seek(0)
        buf.truncate()
    if buf.tell():
        yield buf.getvalue()
