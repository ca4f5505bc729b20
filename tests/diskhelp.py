"""A full disk for the tests: a small tmpfs mounted for one test (root only, else skipped),
and a file grown until it is full."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(where: Path, size: str = "8m") -> Iterator[Path]:
    """A tmpfs of ``size`` mounted at ``where`` for the test (root only, else skipped)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def fill(disk: Path) -> None:
    """Fill ``disk`` to the last byte (a file grown until the write fails)."""
    with (disk / "filler").open("wb", buffering=0) as fh:
        for size in (65536, 1):
            with contextlib.suppress(OSError):
                while fh.write(b"\0" * size):
                    pass
