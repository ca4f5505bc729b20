"""The shape of a data file: its formats, which columns hold what, and the chunks it is read in.

Shared by data-set runs (``simeval.runs``) and the datasets the service stores
(``simeval.service.dataset_files``), which read files the same way.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from simeval.errors import InvalidInput, InvalidOption

FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
CHUNK_ROWS = 1000


def detect_format(path: str | os.PathLike[str], fmt: str | None = None) -> str:
    """The file format: ``fmt`` if given, else from the extension (``.jsonl``, ``.csv``, ...)."""
    if fmt:
        if fmt not in set(FORMATS.values()):
            raise InvalidOption(f"unknown format {fmt!r}; use jsonl, csv, tsv or parquet")
        return fmt
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise InvalidInput(
            f"cannot tell the format of {os.fspath(path)} from its extension; "
            "use .jsonl, .csv, .tsv or .parquet, or give --format"
        )
    return FORMATS[suffix]


@dataclass(frozen=True)
class Columns:
    """Which columns hold the output, the reference answer(s), the input and the case id.

    Several reference columns may be given; in JSONL and Parquet a reference cell may also
    hold a list of strings. ``input`` and ``id`` are optional unless ``*_required``.
    """

    output: str = "output"
    references: tuple[str, ...] = ("reference",)
    input: str = "input"
    id: str = "id"
    input_required: bool = False
    id_required: bool = False


DEFAULT_COLUMNS = Columns()


@dataclass
class Chunk:
    """A slice of the input: raw JSONL lines, parsed CSV records, or an Arrow record batch."""

    index: int
    start: int  # line number (JSONL, CSV) or row number (Parquet) of the first entry, 1-based
    ordinal: int  # data rows before this chunk
    lines: list[bytes] | None = None
    records: list[tuple[int, list[str]]] | None = None
    batch: Any = None
    nbytes: int = 0
    nrows: int = 0


class FileShape(Protocol):
    """What reading a file's rows needs to know of it (a run's ``RunConfig`` has it)."""

    @property
    def source(self) -> str:
        """The file's name as messages show it."""
        ...

    @property
    def fmt(self) -> str:
        """``jsonl``, ``csv``, ``tsv`` or ``parquet``."""
        ...

    @property
    def header(self) -> tuple[str, ...]:
        """A CSV/TSV file's column names."""
        ...

    @property
    def quoting(self) -> bool:
        """Whether quotes in a CSV/TSV file quote (else they are literal text)."""
        ...


@dataclass(frozen=True)
class FileSource:
    """A ``FileShape`` for a file read on its own (not by a run)."""

    source: str
    fmt: str
    header: tuple[str, ...] = ()
    quoting: bool = True
