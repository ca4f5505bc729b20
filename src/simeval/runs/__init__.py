"""Data-set runs: score every row of a JSONL, CSV or Parquet file, stream the results out.

``run_request(RunRequest(file, ...))`` is what ``simeval run`` does; ``run_file(path,
RunOptions(...))`` scores a file with given options; both return a ``RunSummary``.
``calibrate_request`` is ``simeval calibrate``. The modules, one concern each:

- ``config``: formats, columns, evals, the run's configuration and its unit of work (chunks);
- reading JSONL/CSV/Parquet in chunks is ``simeval.datafiles`` (shared with the service);
- ``score``: scoring a chunk (``process_chunk``), with ``plain`` its tight loop, ``state``
  what a worker keeps between chunks and ``encode`` the text of results; ``execute``:
  inline, a process pool, or Dask;
- ``result_files``: the results file and JUnit XML, renamed into place when the run succeeds;
- ``baseline``: earlier runs' cases and the comparison with them;
- ``summary``: the typed summary and the gates;
- ``storing``: storing a run while it is scored, and ``store_writer``, its database writer process
  (``python -m simeval.runs.store_writer``);
- ``run``: a whole run; ``calibration``: thresholds from labelled examples;
- engine runs (``run_engines``, ``simeval run --engines``): ``engines`` (declarations),
  ``engine_http``, ``engine_local`` (the engines), ``engine_cache`` (their response cache),
  ``answering`` (a data set through an engine), ``engine_run`` (every engine, scored, stored,
  compared).

This face imports nothing until a name is used: the run's database writer process starts on
``simeval.runs.store_writer`` and must not load the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simeval.lazy import lazy_face

if TYPE_CHECKING:
    from simeval.datafiles.columns import CHUNK_ROWS, FORMATS, Chunk, Columns, detect_format
    from simeval.datafiles.read import csv_header, input_fields, input_size, read_chunks
    from simeval.runs.baseline import (
        STORED_RUN_PREFIX,
        Baseline,
        BaselineReport,
        CaseChange,
        Comparison,
        iter_results_file,
        load_baseline,
        load_stored_baseline,
    )
    from simeval.runs.calibration import CalibrationRequest, CalibrationSummary, calibrate_request
    from simeval.runs.config import (
        EVAL_FIELDS,
        RESULT_FIELDS,
        TOP_MISSING,
        ChunkOut,
        EvalDef,
        RowError,
        RunConfig,
        UnmatchedRow,
        WorstCase,
        default_results_path,
        load_evals,
    )
    from simeval.runs.engine_run import EngineRunRequest, EngineRunSummary, run_engines
    from simeval.runs.engines import EngineSpec, load_engines
    from simeval.runs.execute import map_chunks
    from simeval.runs.result_files import AtomicFile, JUnitWriter, ResultsWriter, remove_orphans
    from simeval.runs.run import RunOptions, RunRequest, run_file, run_request
    from simeval.runs.score import process_chunk
    from simeval.runs.state import ChunkState, chunk_state
    from simeval.runs.storing import RunStore, RunStoreProcess, store_run
    from simeval.runs.summary import EvalStats, Gate, GateLimits, RunSummary, check_gates
    from simeval.store.run_rows import STORE_COLUMNS

# Each public name and the module it comes from, imported on first use (a worker process or
# the database writer loads only what it uses)
_HOMES = {
    "AtomicFile": "simeval.runs.result_files",
    "Baseline": "simeval.runs.baseline",
    "BaselineReport": "simeval.runs.baseline",
    "CHUNK_ROWS": "simeval.datafiles.columns",
    "CalibrationSummary": "simeval.runs.calibration",
    "CalibrationRequest": "simeval.runs.calibration",
    "CaseChange": "simeval.runs.baseline",
    "Chunk": "simeval.datafiles.columns",
    "ChunkOut": "simeval.runs.config",
    "ChunkState": "simeval.runs.state",
    "Columns": "simeval.datafiles.columns",
    "Comparison": "simeval.runs.baseline",
    "EVAL_FIELDS": "simeval.runs.config",
    "EngineRunRequest": "simeval.runs.engine_run",
    "EngineRunSummary": "simeval.runs.engine_run",
    "EngineSpec": "simeval.runs.engines",
    "EvalDef": "simeval.runs.config",
    "EvalStats": "simeval.runs.summary",
    "FORMATS": "simeval.datafiles.columns",
    "Gate": "simeval.runs.summary",
    "GateLimits": "simeval.runs.summary",
    "JUnitWriter": "simeval.runs.result_files",
    "RESULT_FIELDS": "simeval.runs.config",
    "ResultsWriter": "simeval.runs.result_files",
    "RowError": "simeval.runs.config",
    "RunConfig": "simeval.runs.config",
    "RunOptions": "simeval.runs.run",
    "RunRequest": "simeval.runs.run",
    "RunStore": "simeval.runs.storing",
    "RunStoreProcess": "simeval.runs.storing",
    "RunSummary": "simeval.runs.summary",
    "STORED_RUN_PREFIX": "simeval.runs.baseline",
    "STORE_COLUMNS": "simeval.store.run_rows",
    "TOP_MISSING": "simeval.runs.config",
    "UnmatchedRow": "simeval.runs.config",
    "WorstCase": "simeval.runs.config",
    "calibrate_request": "simeval.runs.calibration",
    "check_gates": "simeval.runs.summary",
    "chunk_state": "simeval.runs.state",
    "csv_header": "simeval.datafiles.read",
    "default_results_path": "simeval.runs.config",
    "detect_format": "simeval.datafiles.columns",
    "input_fields": "simeval.datafiles.read",
    "input_size": "simeval.datafiles.read",
    "iter_results_file": "simeval.runs.baseline",
    "load_baseline": "simeval.runs.baseline",
    "load_engines": "simeval.runs.engines",
    "load_evals": "simeval.runs.config",
    "load_stored_baseline": "simeval.runs.baseline",
    "map_chunks": "simeval.runs.execute",
    "process_chunk": "simeval.runs.score",
    "read_chunks": "simeval.datafiles.read",
    "remove_orphans": "simeval.runs.result_files",
    "run_file": "simeval.runs.run",
    "run_engines": "simeval.runs.engine_run",
    "run_request": "simeval.runs.run",
    "store_run": "simeval.runs.storing",
}


__getattr__, __dir__ = lazy_face(__name__, _HOMES)


__all__ = [
    "CHUNK_ROWS",
    "EVAL_FIELDS",
    "FORMATS",
    "RESULT_FIELDS",
    "STORED_RUN_PREFIX",
    "STORE_COLUMNS",
    "TOP_MISSING",
    "AtomicFile",
    "Baseline",
    "BaselineReport",
    "CalibrationRequest",
    "CalibrationSummary",
    "CaseChange",
    "Chunk",
    "ChunkOut",
    "ChunkState",
    "Columns",
    "Comparison",
    "EngineRunRequest",
    "EngineRunSummary",
    "EngineSpec",
    "EvalDef",
    "EvalStats",
    "Gate",
    "GateLimits",
    "JUnitWriter",
    "ResultsWriter",
    "RowError",
    "RunConfig",
    "RunOptions",
    "RunRequest",
    "RunStore",
    "RunStoreProcess",
    "RunSummary",
    "UnmatchedRow",
    "WorstCase",
    "calibrate_request",
    "check_gates",
    "chunk_state",
    "csv_header",
    "default_results_path",
    "detect_format",
    "input_fields",
    "input_size",
    "iter_results_file",
    "load_baseline",
    "load_engines",
    "load_evals",
    "load_stored_baseline",
    "map_chunks",
    "process_chunk",
    "read_chunks",
    "remove_orphans",
    "run_engines",
    "run_file",
    "run_request",
    "store_run",
]
