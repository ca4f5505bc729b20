"""Reading a data set: JSONL, CSV/TSV and Parquet files in chunks, and the cells of a row.

Bad rows (malformed JSON, a missing column, a cell that is not text, an empty reference)
raise ``BadRow`` with what is wrong; the caller knows where the row is and says so.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, Literal

from simeval.datafiles.columns import CHUNK_ROWS, Chunk, Columns, FileShape
from simeval.errors import InvalidInput


class BadRow(Exception):
    """A row problem before its location is known (the caller names the file and line)."""


# -- reading chunks --------------------------------------------------------------------------
def _open_binary(path: str) -> IO[bytes]:
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise InvalidInput(f"input file not found: {path}") from None
    except IsADirectoryError:
        raise InvalidInput(f"{path} is a directory, not a file") from None


def _jsonl_chunks(path: str, rows: int) -> Iterator[Chunk]:
    with _open_binary(path) as fh:
        index = ordinal = 0
        line_no = 1
        lines: list[bytes] = []
        count = 0
        for line in fh:
            lines.append(line)
            if line.strip():
                count += 1
                if count >= rows:
                    yield Chunk(index, line_no, ordinal, lines=lines, nbytes=fh.tell(), nrows=count)
                    index += 1
                    ordinal += count
                    line_no += len(lines)
                    lines, count = [], 0
        if count:
            yield Chunk(index, line_no, ordinal, lines=lines, nbytes=fh.tell(), nrows=count)


def csv_header(path: str, delimiter: str, quoting: bool = True) -> list[str]:
    """The header row of a CSV/TSV file (``InvalidInput`` when the file is empty)."""
    with (
        _open_binary(path) as raw,
        io.TextIOWrapper(raw, "utf-8-sig", "surrogateescape", newline="") as text,
    ):
        try:
            header = next(csv.reader(text, delimiter=delimiter, quoting=_quoting(quoting)))
        except StopIteration:
            raise InvalidInput(f"{path}: the file is empty (no header row)") from None
        except csv.Error as exc:
            raise InvalidInput(f"{path} line 1: {exc}") from None
    return header


def _quoting(quoting: bool) -> Literal[0, 3]:
    return csv.QUOTE_MINIMAL if quoting else csv.QUOTE_NONE


def _csv_chunks(path: str, rows: int, delimiter: str, quoting: bool = True) -> Iterator[Chunk]:
    csv.field_size_limit(2**31 - 1)  # a long answer is one cell: no 128 KiB cap
    with (
        _open_binary(path) as raw,
        io.TextIOWrapper(raw, "utf-8-sig", "surrogateescape", newline="") as text,
    ):
        reader = csv.reader(text, delimiter=delimiter, quoting=_quoting(quoting))
        try:
            next(reader)  # the header, read separately
            index = ordinal = 0
            records: list[tuple[int, list[str]]] = []
            start = reader.line_num + 1
            first = start
            for fields in reader:
                if fields:  # csv gives [] for a blank line
                    records.append((start, fields))
                start = reader.line_num + 1
                if len(records) >= rows:
                    yield Chunk(
                        index,
                        first,
                        ordinal,
                        records=records,
                        nbytes=raw.tell(),
                        nrows=len(records),
                    )
                    index += 1
                    ordinal += len(records)
                    records, first = [], start
            if records:
                yield Chunk(
                    index, first, ordinal, records=records, nbytes=raw.tell(), nrows=len(records)
                )
        except csv.Error as exc:
            raise InvalidInput(f"{path} line {reader.line_num}: {exc}") from None


def parquet_file(path: str) -> Any:
    """A ``pyarrow.parquet.ParquetFile``, with one-line errors for a missing or broken file
    or a missing pyarrow."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InvalidInput(
            "reading Parquet needs pyarrow: pip install 'simeval[parquet]'"
        ) from None
    if not Path(path).exists():
        raise InvalidInput(f"input file not found: {path}")
    try:
        return pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises its own error types for a broken file
        raise InvalidInput(f"{path}: not a readable Parquet file ({exc})") from None


def _parquet_chunks(path: str, rows: int) -> Iterator[Chunk]:
    pf = parquet_file(path)
    start = 1
    for index, batch in enumerate(pf.iter_batches(batch_size=rows)):
        yield Chunk(
            index,
            start,
            start - 1,
            batch=batch,
            nbytes=start - 1 + batch.num_rows,
            nrows=batch.num_rows,
        )
        start += batch.num_rows


def read_chunks(
    path: str, fmt: str, rows: int = CHUNK_ROWS, quoting: bool = True
) -> Iterator[Chunk]:
    """The input file in chunks of about ``rows`` data rows. ``quoting=False`` reads CSV/TSV
    cells literally (a double quote is an ordinary character, as in plain TSV files)."""
    if fmt == "jsonl":
        return _jsonl_chunks(path, rows)
    if fmt in {"csv", "tsv"}:
        return _csv_chunks(path, rows, "\t" if fmt == "tsv" else ",", quoting)
    return _parquet_chunks(path, rows)


def input_size(path: str, fmt: str) -> int:
    """The progress total: bytes for text formats, rows for Parquet."""
    if fmt == "parquet":
        return int(parquet_file(path).metadata.num_rows)
    return os.path.getsize(path)


def input_fields(path: str, fmt: str, quoting: bool = True) -> tuple[str, ...]:
    """The input's column names (the CSV header, the Parquet schema, the first JSONL object)."""
    if fmt in {"csv", "tsv"}:
        return tuple(csv_header(path, "\t" if fmt == "tsv" else ",", quoting))
    if fmt == "parquet":
        return tuple(parquet_file(path).schema_arrow.names)
    with _open_binary(path) as fh:
        for line in fh:
            if line.strip():
                try:
                    obj = json.loads(line)
                except (ValueError, RecursionError):  # the reader names the line's problem
                    return ()
                return tuple(obj) if isinstance(obj, dict) else ()
    return ()


def parquet_ok() -> None:
    """``InvalidInput`` unless pyarrow can be imported (reading or writing Parquet)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise InvalidInput("Parquet needs pyarrow: pip install 'simeval[parquet]'") from None


# -- decoding rows ---------------------------------------------------------------------------
def type_name(value: object) -> str:
    """How an error names a cell's type ("null", "a number (3)", "a list", ...)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def location(cfg: FileShape, number: int) -> str:
    """Where a row is: the file and its line (text formats) or row (Parquet)."""
    unit = "row" if cfg.fmt == "parquet" else "line"
    return f"{cfg.source} {unit} {number}"


def decode(cfg: FileShape, chunk: Chunk) -> Iterator[tuple[str, int, dict[str, object] | BadRow]]:
    """(where, ordinal, row dict or the problem) for every data row of a chunk."""
    if chunk.lines is not None:
        return _decode_lines(cfg, chunk, chunk.lines)
    if chunk.records is not None:
        return _decode_records(cfg, chunk, chunk.records)
    return (
        (location(cfg, chunk.start + i), chunk.ordinal + i, row)
        for i, row in enumerate(chunk.batch.to_pylist())
    )


def _decode_lines(
    cfg: FileShape, chunk: Chunk, lines: list[bytes]
) -> Iterator[tuple[str, int, dict[str, object] | BadRow]]:
    ordinal = chunk.ordinal
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        at = location(cfg, chunk.start + i)
        try:
            obj = json.loads(line)
            if b"\\u" in line:  # only an escape can make a lone surrogate: look only then
                json.dumps(obj, ensure_ascii=False).encode("utf-8")
        except RecursionError:
            yield at, ordinal, BadRow("nested too deep to read")
        except UnicodeEncodeError as exc:
            yield at, ordinal, BadRow(f"a lone surrogate ({exc.object[exc.start]!r}) in a text")
        except UnicodeDecodeError as exc:
            yield at, ordinal, BadRow(f"not UTF-8 text (byte {exc.start + 1})")
        except ValueError as exc:
            msg = getattr(exc, "msg", str(exc))
            col = getattr(exc, "colno", None)
            yield (
                at,
                ordinal,
                BadRow(f"malformed JSON: {msg}" + (f" (column {col})" if col else "")),
            )
        else:
            if isinstance(obj, dict):
                yield at, ordinal, obj
            else:
                yield at, ordinal, BadRow(f"expected a JSON object, got {type_name(obj)}")
        ordinal += 1


def _decode_records(
    cfg: FileShape, chunk: Chunk, records: list[tuple[int, list[str]]]
) -> Iterator[tuple[str, int, dict[str, object] | BadRow]]:
    header = cfg.header
    ordinal = chunk.ordinal
    for line_no, fields in records:
        at = location(cfg, line_no)
        if len(fields) != len(header):
            hint = ""
            if cfg.quoting and (cfg.fmt == "tsv" or any('"' in f for f in fields)):
                hint = " (if quotes in this file are literal text, read it with --no-quoting)"
            yield (
                at,
                ordinal,
                BadRow(f"{len(fields)} fields where the header has {len(header)}{hint}"),
            )
        else:
            try:
                "".join(fields).encode("utf-8")
            except UnicodeEncodeError:
                yield at, ordinal, BadRow("not UTF-8 text")
            else:
                yield at, ordinal, dict(zip(header, fields, strict=True))
        ordinal += 1


def text_cell(row: Mapping[str, object], col: str, required: bool) -> str | None:
    """The text in column ``col`` (None when it is absent or null and not ``required``)."""
    if col not in row:
        if required:
            have = ", ".join(map(str, row)) or "none"
            raise BadRow(f"missing column {col!r} (columns: {have})")
        return None
    value = row[col]
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise BadRow(f"column {col!r} must be a string, not {type_name(value)}")
    if "\x00" in value:  # no database's text holds it (PostgreSQL refuses it)
        raise BadRow(f"column {col!r} contains a NUL character (\\x00)")
    return value


def id_cell(row: Mapping[str, object], cols: Columns) -> str | None:
    """The row's case id (an integer id as text), or None."""
    if cols.id not in row or row[cols.id] is None:
        if cols.id_required:
            raise BadRow(f"missing column {cols.id!r}")
        return None
    value = row[cols.id]
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise BadRow(f"column {cols.id!r} must be a string or an integer, not {type_name(value)}")


def reference_cells(row: Mapping[str, object], cols: Columns) -> list[str]:
    """The row's reference answers: every reference column's text, or list of texts."""
    refs: list[str] = []
    several = len(cols.references) > 1
    for col in cols.references:
        if col not in row:
            raise BadRow(f"missing column {col!r}")
        value = row[col]
        if isinstance(value, str):
            if several and not value.strip():
                continue  # a blank cell in one of several reference columns: fewer references
            refs.append(value)
        elif isinstance(value, list | tuple) and value and all(isinstance(v, str) for v in value):
            refs.extend(value)
        elif value is None and several:
            continue
        else:
            raise BadRow(
                f"column {col!r} must be a string or a list of strings, not {type_name(value)}"
            )
    if not refs:
        raise BadRow("no reference answer in " + ", ".join(repr(c) for c in cols.references))
    for i, ref in enumerate(refs):
        if not ref.strip():
            label = "reference answer" if len(refs) == 1 else f"reference answer {i + 1}"
            raise BadRow(f"{label} is empty")
        if "\x00" in ref:  # no database's text holds it (PostgreSQL refuses it)
            raise BadRow("a reference answer contains a NUL character (\\x00)")
    return refs
