"""The background tables shipped in the package: a first run on a fresh machine reads them
instead of deriving them from wordfreq (~3 s and 180 MB), and they are what deriving gives."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from simeval.scoring.idf import SHIPPED_TABLES, ship_background_tables

FIRST_RUN = """
import simeval
simeval.score("Paris is the capital of France.", "The capital of France is Paris.")
simeval.score("巴黎是法国的首都。", "法国的首都是巴黎。")
"""


@pytest.mark.process
def test_a_first_run_reads_the_shipped_tables(tmp_path: Path) -> None:
    """A fresh cache directory and home: the default scorer (its CJK table too) scores
    without deriving a table, so it writes none to the cache. Fails when the shipped tables
    are stale (analyzer.py, wordfreq or PyStemmer changed): run `make tables`."""
    cache = tmp_path / "cache"
    env = {**os.environ, "SIMEVAL_CACHE_DIR": str(cache), "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", FIRST_RUN], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert not cache.exists() or sorted(p.name for p in cache.iterdir()) == []


@pytest.mark.slow
def test_the_shipped_tables_are_what_deriving_gives(tmp_path: Path) -> None:
    written = ship_background_tables(tmp_path)
    shipped = sorted(SHIPPED_TABLES.glob("background-*.json.gz"))
    assert [p.name for p in sorted(written)] == [p.name for p in shipped]
    for mine, theirs in zip(sorted(written), shipped, strict=True):
        assert mine.read_bytes() == theirs.read_bytes(), theirs.name
