"""Token accounting: endpoint usage first, tiktoken when cached offline, else the approximation."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from agents.brain import tokens
from agents.brain.tokens import (
    TokenUsage, approx_token_count, count_message_tokens, count_tokens, image_tokens,
    measure_call, tokenizer_name, usage_from_response,
)


@pytest.fixture
def offline_tiktoken(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """An empty tiktoken cache and no download permission: the fallback must be used."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KAIROS_TIKTOKEN_DOWNLOAD", raising=False)
    monkeypatch.setattr(tokens, "_encodings", {})
    yield
    tokens._encodings.clear()


def test_the_approximation_is_deterministic_and_word_piece_shaped() -> None:
    assert approx_token_count("") == 0
    assert approx_token_count("Open the Settings app.") == 1 + 1 + 2 + 1 + 1
    assert approx_token_count("CLICK <point>[[500, 250]]</point>") == approx_token_count(
        "CLICK <point>[[500, 250]]</point>")
    assert approx_token_count("internationalization") == 1 + 3  # 7 letters, then 13 more
    assert approx_token_count("2400 x 1080") == 2 + 1 + 2  # digits in groups of three


def test_count_tokens_falls_back_without_a_cached_encoding(offline_tiktoken: None) -> None:
    text = "Turn on Wi-Fi in Settings, then go home."
    assert tokenizer_name() == "approx"
    assert count_tokens(text) == approx_token_count(text)
    assert count_tokens(text, "gpt-4o") == approx_token_count(text)
    assert count_tokens("") == 0


def test_message_counts_include_text_parts_overhead_and_images(offline_tiktoken: None) -> None:
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "hello world"}, {"type": "image_url", "image_url": {"url": "data:..."}}]}]
    assert count_message_tokens(messages, image_sizes=[(512, 512)]) == 3 + 4 + 2 + 85 + 170 * 1
    assert image_tokens(462, 1024) == 85 + 170 * 1 * 2  # one tile wide, two tall
    assert image_tokens(462, 1024, detail="low") == 85


def test_endpoint_usage_wins_over_local_counts() -> None:
    response = SimpleNamespace(usage=SimpleNamespace(prompt_tokens=700, completion_tokens=30))
    assert usage_from_response(response) == TokenUsage(700, 30, "endpoint")
    assert measure_call(response, [], ["whatever"]) == TokenUsage(700, 30, "endpoint")
    assert usage_from_response(SimpleNamespace(usage=None)) is None


def test_without_usage_the_call_is_counted_locally(offline_tiktoken: None) -> None:
    messages = [{"role": "user", "content": "Open the Settings app."}]
    usage = measure_call(SimpleNamespace(usage=None), messages, ["Action: PRESS_HOME", "WAIT"])
    assert usage.source == "approx"
    assert usage.prompt_tokens == 3 + 4 + 6
    assert usage.completion_tokens == approx_token_count("Action: PRESS_HOME") + 1


def test_usages_add_up_and_remember_a_mixed_source() -> None:
    total = TokenUsage(10, 2, "endpoint") + TokenUsage(5, 1, "approx")
    assert (total.prompt_tokens, total.completion_tokens, total.total_tokens) == (15, 3, 18)
    assert total.source == "mixed"
    assert (TokenUsage() + TokenUsage(1, 1, "approx")).source == "approx"
