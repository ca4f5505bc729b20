"""The service: the one API the CLI, the HTTP API and the studio pages call.

``Service(db)`` opens a store (creating or migrating it) and offers the eval lifecycle, captures
and their results, reviews, trends, settings, retention, export/import, and data-set runs. User
mistakes raise ``SimevalError`` subclasses with a one-line message (``NotFound`` 404,
``Conflict`` 409, ``InvalidInput``/``InvalidOption``/``InvalidType`` 400).

Decisions worth knowing:

- Input scope: an eval with a scope fires only on captures whose input *equals* the scope after
  Unicode NFKC normalisation, case folding and whitespace folding (``scope_key``); an unscoped
  eval fires on every capture.
- Capture: the capture and all its results are written in one transaction, the results packed
  on the capture's row. The active evals are prepared once per process (``scoring.evalset``);
  the cache is keyed by a revision counter stored in the database, which every change to an
  eval bumps, so a change made by another process is picked up on the next capture. The output
  is vectorised once per scorer configuration and scored against every eval at once.
- Explanations of capture results are computed when a result is shown, not when it is stored:
  an explanation is a pure function of the output, the matched eval version's references and
  its scorer options, all of which are stored, and computing it for 1,000 evals per capture
  would cost ten times the scoring itself. If the scorer's fingerprint today differs from the
  stored one (e.g. a corpus IDF table changed), the explanation carries a ``note`` saying so.
  Tests store their explanation; a data-set run row keeps where it came from and is explained
  when shown, from the scorer options its run keeps.
- Reviews override pass/fail everywhere (listings, trends, stats, exports): the effective
  score is the review's, and a result passes when it is at or above the threshold used.
  The automated score and verdict stay visible beside it.
- Editing the references, threshold, scope or options of an active eval makes a *pending*
  version: the version in force (``Eval.active_version``) keeps scoring captures until the
  pending one has a passing test and is activated, which switches over. ``deactivate``
  makes an active or archived eval a draft.
- Size: a capture's or a test's input and output may each have up to ``MAX_TEXT_CHARS``
  (1,000,000) characters, the most the HTTP API's default 1 MiB body can carry, so the library,
  the CLI and the API accept the same captures. A longer text (say a 10 MB runaway generation)
  is refused with ``InvalidInput`` naming its size, and nothing is stored: a store that keeps
  every capture should not silently grow by megabytes per response, and truncating would store
  something the engine never said. Data-set runs (``add_run_results``) have no such limit.
- ``capture(..., captured_at=...)`` backfills a capture from a log: the capture and its results
  are dated then (trends and retention use that time).
- Trends and eval stats count captured results; data-set runs are listed by ``run_id``.

>>> from simeval.service import Service
>>> svc = Service(":memory:")
>>> ev = svc.create_eval("capital", "Paris is the capital of France.")
>>> svc.test_eval("capital", "Capital of France?", "The capital of France is Paris.").passed
True
>>> svc.activate_eval("capital").status
'active'
>>> [r.passed for r in svc.capture("Capital of France?", "Paris is France's capital.").results]
[True]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simeval.lazy import lazy_face

if TYPE_CHECKING:
    from simeval.checks import (
        MAX_TEXT_CHARS,
        UNSET,
        check_capture,
        check_capture_row,
        file_key_prefix,
        parse_time,
        read_capture_file,
        read_capture_lines,
    )
    from simeval.scoring.analyzer import scope_key
    from simeval.scoring.options import RETENTION_CHOICES
    from simeval.service.evalfiles import (
        EVALS_FORMAT,
        dump_evals_document,
        parse_evals_document,
        validate_evals_document,
    )
    from simeval.service.export import EXPORT_COLUMNS
    from simeval.service.facade import Service, open_service
    from simeval.service.filters import ResultFilter
    from simeval.service.queries import RESULT_ID_PATTERN, parse_result_id
    from simeval.service.trends import BUCKETS

# Each public name and the module it comes from, imported on first use: a process that needs
# one part of the service (the writer of ``simeval run --store`` needs ``runs``) does not pay
# for importing all of them.
_HOMES = {
    "BUCKETS": "simeval.service.trends",
    "EVALS_FORMAT": "simeval.service.evalfiles",
    "EXPORT_COLUMNS": "simeval.service.export",
    "MAX_TEXT_CHARS": "simeval.checks",
    "RESULT_ID_PATTERN": "simeval.service.queries",
    "RETENTION_CHOICES": "simeval.scoring.options",
    "ResultFilter": "simeval.service.filters",
    "UNSET": "simeval.checks",
    "Service": "simeval.service.facade",
    "check_capture": "simeval.checks",
    "check_capture_row": "simeval.checks",
    "dump_evals_document": "simeval.service.evalfiles",
    "file_key_prefix": "simeval.checks",
    "open_service": "simeval.service.facade",
    "parse_evals_document": "simeval.service.evalfiles",
    "parse_result_id": "simeval.service.queries",
    "parse_time": "simeval.checks",
    "read_capture_file": "simeval.checks",
    "read_capture_lines": "simeval.checks",
    "scope_key": "simeval.scoring.analyzer",
    "validate_evals_document": "simeval.service.evalfiles",
}


__getattr__, __dir__ = lazy_face(__name__, _HOMES)


__all__ = [
    "BUCKETS",
    "EVALS_FORMAT",
    "EXPORT_COLUMNS",
    "MAX_TEXT_CHARS",
    "RESULT_ID_PATTERN",
    "RETENTION_CHOICES",
    "UNSET",
    "ResultFilter",
    "Service",
    "check_capture",
    "check_capture_row",
    "dump_evals_document",
    "file_key_prefix",
    "open_service",
    "parse_evals_document",
    "parse_result_id",
    "parse_time",
    "read_capture_file",
    "read_capture_lines",
    "scope_key",
    "validate_evals_document",
]
