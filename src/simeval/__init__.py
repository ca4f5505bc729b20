"""simeval: local-first similarity evals for LLM and engine output.

>>> import simeval
>>> simeval.score("Paris is the capital of France.", "The capital of France is Paris.")
1.0

Evals, captures and results live in a database behind ``simeval.Service(path)``.
"""

from typing import TYPE_CHECKING, Any

from simeval.errors import (
    Conflict,
    InvalidInput,
    InvalidOption,
    InvalidType,
    NotFound,
    SimevalError,
)
from simeval.scoring.batch import iter_scores, score_many
from simeval.scoring.explain import Explanation, Term
from simeval.scoring.idf import IdfTable, fit_idf
from simeval.scoring.scorer import (
    DEFAULT_THRESHOLD,
    Scorer,
    explain,
    fingerprint,
    get_scorer,
    score,
)

__version__ = "0.2.0"

if TYPE_CHECKING:
    from simeval.client import Client
    from simeval.service import Service, open_service


def __getattr__(name: str) -> Any:
    # the store pulls in SQLAlchemy and Alembic: loaded on first use, so `import simeval`
    # stays quick for scoring alone
    if name in ("Service", "open_service"):
        from simeval import service

        return getattr(service, name)
    if name == "Client":
        from simeval.client import Client

        return Client
    raise AttributeError(f"module 'simeval' has no attribute {name!r}")


__all__ = [
    "DEFAULT_THRESHOLD",
    "Client",
    "Conflict",
    "Explanation",
    "IdfTable",
    "InvalidInput",
    "InvalidOption",
    "InvalidType",
    "NotFound",
    "Scorer",
    "Service",
    "SimevalError",
    "Term",
    "__version__",
    "explain",
    "fingerprint",
    "fit_idf",
    "get_scorer",
    "iter_scores",
    "open_service",
    "score",
    "score_many",
]
