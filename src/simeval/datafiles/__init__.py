"""Data files: JSONL, CSV/TSV and Parquet files read in chunks, and the cells of a row.

Below both the service (which stores datasets read from files) and data-set runs (which
score them), so that both read a file the same way and neither reaches into the other.

- ``columns``: the formats, which columns hold what (``Columns``), a file's shape, the chunks.
- ``read``: reading a file in chunks, decoding its rows, the cells of a row (``BadRow``).
"""

from __future__ import annotations

from simeval.datafiles.columns import (
    CHUNK_ROWS,
    DEFAULT_COLUMNS,
    FORMATS,
    Chunk,
    Columns,
    FileShape,
    FileSource,
    detect_format,
)
from simeval.datafiles.read import (
    BadRow,
    csv_header,
    decode,
    id_cell,
    input_fields,
    input_size,
    read_chunks,
    reference_cells,
    text_cell,
)

__all__ = [
    "CHUNK_ROWS",
    "DEFAULT_COLUMNS",
    "FORMATS",
    "BadRow",
    "Chunk",
    "Columns",
    "FileShape",
    "FileSource",
    "csv_header",
    "decode",
    "detect_format",
    "id_cell",
    "input_fields",
    "input_size",
    "read_chunks",
    "reference_cells",
    "text_cell",
]
