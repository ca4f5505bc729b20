"""Test helpers: assert that an output is similar enough to a reference answer.

>>> round(assert_similar("The Eiffel Tower is in Paris.", "The Eiffel Tower stands in Paris."), 2)
0.98
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from simeval.scoring.options import DEFAULT_THRESHOLD, check_threshold
from simeval.scoring.scorer import get_scorer

__all__ = ["assert_similar"]


def assert_similar(
    output: str,
    reference: str | Sequence[str],
    threshold: float = DEFAULT_THRESHOLD,
    **options: Any,
) -> float:
    """Fail (``AssertionError``) unless ``output`` scores at least ``threshold``.

    The message gives the score, the threshold and the reference terms the output is missing,
    so a failing test says what to fix. Returns the score when it passes. Scorer options are
    those of ``simeval.score``.

    Example (in a pytest test)::

        from simeval.testing import assert_similar

        def test_answer():
            assert_similar(my_bot("Where is the Eiffel Tower?"),
                           "The Eiffel Tower is in Paris.", threshold=0.7)
    """
    __tracebackhide__ = True  # pytest shows the caller's line, not this helper's
    limit = check_threshold(threshold)
    scorer = get_scorer(**options)
    score, at = scorer.score_detail(output, reference)
    if score >= limit:
        return score
    exp = scorer.explain(output, reference)
    missing = ", ".join(t.term for t in exp.missing) or "none"
    several = not isinstance(reference, str) and len(reference) > 1
    which = f" (best match: reference {at + 1} of {len(reference)})" if several else ""
    reason = f"; {exp.reason}" if exp.reason else ""
    raise AssertionError(
        f"similarity {score:.4f} is below the threshold {limit:.2f}{which}{reason}; "
        f"missing reference terms: {missing}"
    )
