"""`simeval.testing.assert_similar`: passes quietly, fails with a message that helps."""

from __future__ import annotations

import re

import pytest

import simeval
from simeval.testing import assert_similar

REFERENCE = "The Eiffel Tower is in Paris and was finished in 1889."


def test_passing_returns_the_score() -> None:
    out = "The Eiffel Tower, finished in 1889, is in Paris."
    assert assert_similar(out, REFERENCE, threshold=0.5) == simeval.score(out, REFERENCE)


def test_failure_names_score_threshold_and_missing_terms() -> None:
    out = "The Eiffel Tower is tall."
    score = simeval.score(out, REFERENCE)
    with pytest.raises(AssertionError) as info:
        assert_similar(out, REFERENCE, threshold=0.8)
    message = str(info.value)
    assert f"similarity {score:.4f} is below the threshold 0.80" in message
    missing = re.search(r"missing reference terms: (.*)$", message)
    assert missing is not None
    assert {"paris", "1889", "finished"} <= set(missing.group(1).split(", "))
    assert "eiffel" not in missing.group(1)


def test_default_threshold_is_080() -> None:
    # about 0.78 (cosine 0.54): passes 0.6, fails the default
    out = "The Eiffel Tower is in France."
    assert 0.6 < simeval.score(out, REFERENCE) < 0.8
    assert_similar(out, REFERENCE, 0.6)
    with pytest.raises(AssertionError, match=r"threshold 0\.80"):
        assert_similar(out, REFERENCE)


def test_several_references_name_the_best_match() -> None:
    refs = ["Tokyo is the capital of Japan.", "The Eiffel Tower is in Paris."]
    with pytest.raises(AssertionError, match=r"best match: reference 2 of 2"):
        assert_similar("The Eiffel Tower stands somewhere.", refs, threshold=0.95)


def test_empty_output_says_why() -> None:
    with pytest.raises(AssertionError, match=r"similarity 0.0000 .*output is empty.*paris"):
        assert_similar("  ", REFERENCE)


def test_options_and_bad_arguments() -> None:
    assert assert_similar("running dogs", "run dog", threshold=0.99) == 1.0
    with pytest.raises(AssertionError):
        assert_similar("running dogs", "run dog", threshold=0.99, stemming=False)
    with pytest.raises(simeval.InvalidInput, match="threshold"):
        assert_similar("a", "a", threshold=1.5)
    with pytest.raises(simeval.InvalidType):
        assert_similar(None, "a")  # type: ignore[arg-type]
