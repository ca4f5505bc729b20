"""The engines' response cache: a rerun asks an engine only for what changed.

An answer is kept under the hash of what it depends on: the engine's identity (kind, URL,
model, system prompt, parameters, command or callable: ``EngineSpec.identity``, never the API
key nor the engine's display name), the prompt (the template applied to the input) and the
repeat's number (``--repeat 3`` keeps three answers). Errors are not kept: a rerun asks again.

The cache is one SQLite file, ``engine-cache.sqlite3`` in the user's cache directory
(``platformdirs.user_cache_dir("simeval")``, e.g. ``~/.cache/simeval`` on Linux), or the file
``--cache PATH`` names; ``--no-cache`` neither reads nor writes it. Deleting the file empties
it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path

from simeval.errors import InvalidInput
from simeval.runs.engines import Answer, EngineSpec

CACHE_FILE = "engine-cache.sqlite3"
_COMMIT_EVERY = 500  # answers kept per transaction


def default_cache_path() -> str:
    """Where the cache lives unless ``--cache`` says otherwise."""
    import platformdirs

    return os.path.join(platformdirs.user_cache_dir("simeval"), CACHE_FILE)


def cache_key(spec: EngineSpec, prompt: str, repeat: int) -> str:
    """The key of one answer (see the module docstring)."""
    doc = json.dumps(
        {"engine": spec.identity(), "prompt": prompt, "repeat": repeat},
        sort_keys=True,
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(doc.encode("utf-8", "surrogatepass")).hexdigest()


class ResponseCache:
    """Answers by key, in a SQLite file (writes batched; ``close`` commits the rest)."""

    def __init__(self, path: str):
        self.path = path
        try:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, output TEXT NOT NULL,"
                " prompt_tokens INTEGER, completion_tokens INTEGER, created REAL NOT NULL)"
            )
        except (OSError, sqlite3.Error) as exc:
            raise InvalidInput(f"cannot open the response cache {path}: {exc}") from None
        self.pending = 0

    def get(self, key: str) -> Answer | None:
        """The kept answer, or None."""
        row = self.db.execute(
            "SELECT output, prompt_tokens, completion_tokens FROM answers WHERE key = ?", (key,)
        ).fetchone()
        if row is None:
            return None
        return Answer(output=row[0], prompt_tokens=row[1], completion_tokens=row[2], cached=True)

    def put(self, key: str, answer: Answer) -> None:
        """Keep a successful answer."""
        if answer.output is None:
            return
        if self.pending == 0:
            self.db.execute("BEGIN")
        self.db.execute(
            "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?)",
            (key, answer.output, answer.prompt_tokens, answer.completion_tokens, time.time()),
        )
        self.pending += 1
        if self.pending >= _COMMIT_EVERY:
            self.flush()

    def flush(self) -> None:
        """Commit the answers kept so far."""
        if self.pending:
            self.db.execute("COMMIT")
            self.pending = 0

    def close(self) -> None:
        """Commit and close."""
        self.flush()
        self.db.close()

    def __enter__(self) -> ResponseCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
