"""Corpus IDF tables named over the HTTP API and the studio: looked up by name in one
directory the server is started with (``simeval serve --idf-dir``), never by path.

A scorer option ``idf`` other than ``background`` or ``pair`` names a corpus table. The CLI and
the library take a path (the user's own machine); a request to the server is someone else's
input, so it may only name a regular file directly in the IDF directory, of at most
``MAX_IDF_BYTES``: no other path is opened (not ``/dev/zero``, a FIFO or a directory), and
every refusal reads the same whether or not a file of that name exists elsewhere.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path, PurePath

from simeval.errors import InvalidOption
from simeval.jsontypes import JSONObject
from simeval.service.store_names import sqlite_file

MAX_IDF_BYTES = 64 * 1024 * 1024
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_BUILT_IN = ("background", "pair")


def resolve_idf_dir(db_url: str, idf_dir: str | os.PathLike[str] | None) -> Path:
    """The IDF directory: ``idf_dir``, else the SQLite file's directory, else the user data
    directory."""
    if idf_dir is not None:
        return Path(idf_dir).expanduser().resolve()
    database = sqlite_file(db_url)
    if database:
        return Path(database).resolve().parent
    import platformdirs

    return Path(platformdirs.user_data_dir("simeval", appauthor=False))


def idf_option(idf_dir: Path, options: JSONObject | None) -> JSONObject | None:
    """``options`` with a corpus table's name replaced by its path in ``idf_dir``, checked;
    ``InvalidOption`` for anything else."""
    if not options or "idf" not in options:
        return options
    name = options["idf"]
    if name is None or name in _BUILT_IN:
        return options
    refusal = (
        f"scorer option 'idf' must be background, pair, or the name of a corpus IDF table "
        f"(a regular file of at most {MAX_IDF_BYTES // (1024 * 1024)} MB) in the server's "
        "IDF directory (simeval serve --idf-dir); paths are not accepted over the API"
    )
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise InvalidOption(refusal)
    path = idf_dir / name
    try:
        info = os.stat(path, follow_symlinks=False)
    except OSError:
        raise InvalidOption(f"{refusal}; there is no table {name!r}") from None
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_IDF_BYTES:
        raise InvalidOption(refusal)
    return {**options, "idf": str(path)}


def shown_idf(data: dict[str, object]) -> dict[str, object]:
    """An eval's (or version's) dump with a corpus IDF table shown by its file name: the API
    names tables by name in the server's IDF directory, and where the server keeps its files
    is none of a client's business."""
    options = data.get("options") if isinstance(data, dict) else None
    if isinstance(options, dict) and isinstance(options.get("idf"), str):
        idf = options["idf"]
        if idf not in _BUILT_IN:
            data["options"] = {**options, "idf": PurePath(idf).name}
    return data
