"""The layout of a stored run row: the columns a run's workers fill and its writer stores.

A run's workers build these tuples (``simeval.runs``), and the run writer hands them to
``Service.add_run_rows`` in this order. The explanation is JSON text already. Nothing here
touches SQL, so a worker process imports it without the database layer.

>>> STORE_COLUMNS[:3]
('eval_name', 'eval_version', 'score')
"""

from __future__ import annotations

STORE_COLUMNS = (
    "eval_name",
    "eval_version",
    "score",
    "passed",
    "threshold",
    "fingerprint",
    "matched_index",
    "input",
    "output",
    "reference",
    "explanation",
)
