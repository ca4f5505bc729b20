"""Writing a run's files: the results file (JSONL, CSV/TSV or Parquet) and JUnit XML, each
written beside its final path and renamed into place only when the run succeeds, so a failed
run leaves nothing half-written. Temp files a killed run left behind are removed by the next.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import tempfile
from pathlib import Path
from typing import IO, Any

from simeval.errors import InvalidInput
from simeval.processes import pid_alive
from simeval.runs.config import ChunkOut, RunConfig
from simeval.runs.encode import result_types, xml_attr


def remove_orphans(directory: Path, name: str) -> int:
    """Remove the hidden temp files a killed run left beside ``name``
    (``.<name>.<pid>.<random>.tmp|.cases``) whose process is gone; returns how many."""
    removed = 0
    prefix = f".{name}."
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(prefix) or not entry.name.endswith((".tmp", ".cases")):
            continue
        pid_text = entry.name[len(prefix) :].split(".", 1)[0]
        if pid_text.isdigit() and not pid_alive(int(pid_text)):
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed += 1
    return removed


class AtomicFile:
    """A file written beside its final path and renamed over it only on ``commit``."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        directory = self.path.parent
        if not directory.is_dir():
            raise InvalidInput(f"cannot write {self.path}: directory {directory} does not exist")
        remove_orphans(directory, self.path.name)
        fd, tmp = tempfile.mkstemp(
            dir=directory, prefix=f".{self.path.name}.{os.getpid()}.", suffix=".tmp"
        )
        self.tmp = Path(tmp)
        self.fh: IO[bytes] = os.fdopen(fd, "wb")

    def commit(self) -> None:
        self.fh.flush()
        os.fsync(self.fh.fileno())
        self.fh.close()
        os.replace(self.tmp, self.path)

    def discard(self) -> None:
        if not self.fh.closed:
            self.fh.close()
        self.tmp.unlink(missing_ok=True)


class ResultsWriter:
    """Results rows in the chosen format, atomically."""

    def __init__(self, path: str, cfg: RunConfig):
        self.file = AtomicFile(path)
        self.fmt = cfg.out_fmt
        self.cfg = cfg
        self.parquet: Any = None
        self.schema: Any = None
        if self.fmt in {"csv", "tsv"}:
            head = io.StringIO()
            csv.writer(
                head, delimiter="\t" if self.fmt == "tsv" else ",", lineterminator="\n"
            ).writerow(list(cfg.out_fields) + list(cfg.result_fields))
            self.file.fh.write(head.getvalue().encode("utf-8"))

    def write(self, out: ChunkOut) -> None:
        if out.data:
            self.file.fh.write(out.data)
        elif out.batch is not None:
            import pyarrow as pa
            import pyarrow.parquet as pq

            batch = out.batch
            if self.parquet is None:
                self.schema = batch.schema
                self.parquet = pq.ParquetWriter(self.file.fh, self.schema)
            elif batch.schema != self.schema:
                try:
                    batch = pa.Table.from_batches([batch]).cast(self.schema)
                except (pa.ArrowInvalid, ValueError) as exc:
                    raise InvalidInput(
                        f"{self.cfg.source}: a later chunk has other column "
                        f"types than the first ({exc})"
                    ) from None
            self.parquet.write(
                batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
            )

    def commit(self) -> None:
        if self.fmt == "parquet":
            if self.parquet is None:  # no result rows: still a valid, empty file
                import pyarrow as pa
                import pyarrow.parquet as pq

                types = result_types()
                schema = pa.schema([(f, types[f]) for f in self.cfg.result_fields])
                self.parquet = pq.ParquetWriter(self.file.fh, schema)
            self.parquet.close()
        self.file.commit()

    def discard(self) -> None:
        if self.parquet is not None:
            with contextlib.suppress(Exception):  # the file is thrown away anyway
                self.parquet.close()
        self.file.discard()


class JUnitWriter:
    """JUnit XML, one test case per row: the cases stream to a side file, the counts go on
    top at the end (a CI system reads the ``testsuite`` attributes first)."""

    def __init__(self, path: str, suite: str):
        self.final = AtomicFile(path)
        fd, body = tempfile.mkstemp(
            dir=self.final.path.parent,
            prefix=f".{self.final.path.name}.{os.getpid()}.",
            suffix=".cases",
        )
        self.body_path = Path(body)
        self.body = os.fdopen(fd, "w+b")
        self.suite = suite

    def write(self, out: ChunkOut) -> None:
        if out.junit:
            self.body.write(out.junit)

    def commit(self, tests: int, failures: int, errors: int, seconds: float) -> None:
        import shutil

        head = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuites tests="{tests}" failures="{failures}" errors="{errors}" '
            f'time="{seconds:.3f}">\n'
            f'<testsuite name={xml_attr(self.suite)} tests="{tests}" '
            f'failures="{failures}" errors="{errors}" skipped="0" time="{seconds:.3f}">\n'
        )
        fh = self.final.fh
        fh.write(head.encode("utf-8"))
        self.body.seek(0)
        shutil.copyfileobj(self.body, fh)
        fh.write(b"</testsuite>\n</testsuites>\n")
        self.body.close()
        self.body_path.unlink(missing_ok=True)
        self.final.commit()

    def discard(self) -> None:
        self.body.close()
        self.body_path.unlink(missing_ok=True)
        self.final.discard()
