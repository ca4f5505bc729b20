"""simeval: local-first similarity evals for LLM and engine output.

>>> import simeval
>>> simeval.score("Paris is the capital of France.", "The capital of France is Paris.")
1.0
"""

from simeval.errors import (
    Conflict,
    InvalidInput,
    InvalidOption,
    InvalidType,
    NotFound,
    SimevalError,
)
from simeval.idf import IdfTable, fit_idf
from simeval.scorer import (
    DEFAULT_THRESHOLD,
    Explanation,
    Scorer,
    Term,
    explain,
    fingerprint,
    get_scorer,
    iter_scores,
    score,
    score_many,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_THRESHOLD",
    "Conflict",
    "Explanation",
    "IdfTable",
    "InvalidInput",
    "InvalidOption",
    "InvalidType",
    "NotFound",
    "Scorer",
    "SimevalError",
    "Term",
    "__version__",
    "explain",
    "fingerprint",
    "fit_idf",
    "get_scorer",
    "iter_scores",
    "score",
    "score_many",
]
