"""``simeval.vocabulary``: the capture key of a model call and the one metadata vocabulary."""

from __future__ import annotations

from typing import Any

import pytest

from simeval.checks import check_capture_key
from simeval.vocabulary import VOCABULARY, call_key, normal_meta


def test_call_key_choice_0_is_the_old_key_and_others_differ() -> None:
    assert call_key("chatcmpl-1") == "chatcmpl-1"
    keys = [call_key("chatcmpl-1", i) for i in range(4)]
    assert keys == ["chatcmpl-1", "chatcmpl-1#1", "chatcmpl-1#2", "chatcmpl-1#3"]
    long_id = "resp_" + "x" * 400
    long_keys = {call_key(long_id, i) for i in range(3)}
    assert len(long_keys) == 3  # distinct, and each a valid stored key
    assert all(check_capture_key(k) == k for k in long_keys)
    assert call_key(long_id, 2) == call_key(long_id, 2)  # stable
    assert call_key("a\nb") is not None and "\n" not in (call_key("a\nb") or "")
    assert call_key("x" * 201) != call_key("x" * 202)
    assert call_key(None) is None and call_key("") is None and call_key(7) is None
    assert call_key("id", -1) == call_key("id", True) == "id"  # no choice: the call's key


@pytest.mark.parametrize(
    ("given", "finish"),
    [
        ({"finish_reason": "stop"}, "stop"),
        ({"finish_reason": ["stop"]}, "stop"),
        ({"finish_reason": '["stop"]'}, "stop"),
        ({"finish_reason": ["stop", "length"]}, "stop,length"),
        ({"gen_ai.response.finish_reasons": ["tool_calls"]}, "tool_calls"),
        ({"finish_reasons": ("length",)}, "length"),
        ({"finish_reason": "[not json"}, "[not json"),
    ],
)
def test_finish_reason_is_one_string(given: dict[str, Any], finish: str) -> None:
    assert normal_meta(given)["finish_reason"] == finish  # type: ignore[index]


def test_an_empty_finish_reason_is_left_out() -> None:
    assert normal_meta({"finish_reason": []}) == {}
    assert normal_meta({"finish_reason": ""}) == {}


def test_token_counts_model_and_provider_under_one_name() -> None:
    sources: list[dict[str, Any]] = [
        {"usage": {"prompt_tokens": 3, "completion_tokens": 5}},
        {"usage": {"input_tokens": 3, "output_tokens": 5}},
        {"gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 5},
        {"llm.token_count.prompt": 3, "llm.token_count.completion": 5},
        {"input_tokens": "3", "output_tokens": 5.0},
    ]
    for meta in sources:
        out = normal_meta(meta)
        assert out is not None
        assert (out["input_tokens"], out["output_tokens"]) == (3, 5), meta
        # the source's own names are kept beside the vocabulary's
        assert {k: out[k] for k in meta if k not in VOCABULARY} == {
            k: v for k, v in meta.items() if k not in VOCABULARY
        }
    out = normal_meta({"gen_ai.response.model": "gpt-4o", "gen_ai.system": "openai"})
    assert out is not None and (out["model"], out["provider"]) == ("gpt-4o", "openai")
    out = normal_meta({"llm.model_name": "m", "llm.provider": "p", "model": "given"})
    assert out is not None and (out["model"], out["provider"]) == ("given", "p")


def test_unreadable_values_are_kept_and_the_function_is_idempotent() -> None:
    meta = {"input_tokens": "many", "latency_ms": 12.5, "other": [1, 2]}
    assert normal_meta(meta) == meta
    once = normal_meta({"finish_reason": ["stop"], "usage": {"prompt_tokens": 9}})
    assert normal_meta(once) == once
    assert normal_meta(None) is None
    given = {"finish_reason": ["stop"]}
    normal_meta(given)
    assert given == {"finish_reason": ["stop"]}  # not changed in place
    assert set(VOCABULARY) == {
        "model",
        "provider",
        "finish_reason",
        "input_tokens",
        "output_tokens",
        "latency_ms",
    }
