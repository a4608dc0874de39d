"""RecAgent §3.3's optional LLM intent pathway in the ``openai`` backend (fake server)."""
from __future__ import annotations

from typing import Any

import pytest

from agents.brain.backends.openai import OpenAIBackend, parse_element_ids
from tests.agents.fake_openai import FakeOpenAI, Reply
from tests.agents.test_openai_backend import WIFI_ANSWER, backend, make_ctx, prompt_text

ABOUT_KEY = "com.android.settings:id/about"  # #6 "About phone": no keyword/semantic pathway names it


def element_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("#")]


def test_the_pathway_sends_the_whole_element_list_and_its_pick_reaches_the_prompt(
        fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        Reply.completion('{"ids": [6]}', usage={"prompt_tokens": 300, "completion_tokens": 8}),
        Reply.completion(WIFI_ANSWER, usage={"prompt_tokens": 812, "completion_tokens": 41}),
    )
    proposal = backend(fake_openai, llm_recommend=True).propose(make_ctx())

    assert len(fake_openai.requests) == 2
    ask, act = fake_openai.requests
    ask_text = prompt_text(ask)
    assert isinstance(ask["messages"][0]["content"], str)  # a short text-only call
    assert ask["max_tokens"] <= 256
    assert "Final goal: Turn on Wi-Fi" in ask_text and '{"ids": [' in ask_text
    # The full list, not the recommended subset: every row is offered to the model.
    for label in ("Wi-Fi", "Bluetooth", "Display", "Battery", "Storage", "About phone"):
        assert f'"{label}"' in ask_text
    # Only the LLM pathway named "About phone"; the union puts it in the action prompt.
    act_text = prompt_text(act)
    assert '#6 TextView "About phone"' in act_text
    assert '#1 Switch "Wi-Fi" OFF' in act_text
    assert ABOUT_KEY in proposal.candidates
    assert proposal.extra["llm_recommended"] == [ABOUT_KEY]
    # Both calls are the step's cost.
    assert (proposal.prompt_tokens, proposal.completion_tokens) == (1112, 49)
    assert proposal.extra["calls"] == 2 and proposal.action is not None


def test_without_the_pathway_the_same_step_leaves_that_element_out(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER))
    proposal = backend(fake_openai).propose(make_ctx())
    assert len(fake_openai.requests) == 1  # disabled by default: no extra request
    assert "About phone" not in prompt_text(fake_openai.requests[0])
    assert ABOUT_KEY not in proposal.candidates and "llm_recommended" not in proposal.extra


@pytest.mark.parametrize("answer", [
    "I would tap the Wi-Fi switch, probably 6 or so.",   # prose, no ids
    "{\"ids\": [\"wifi\", null]}",                        # ids that are not ids
    "```json\n{\"ids\": [99, 1234]}\n```",                # ids that do not exist
    "",                                                   # nothing at all
    "{\"ids\": [",                                        # cut off
])
def test_garbage_from_the_pathway_leaves_the_keyword_and_semantic_result_intact(
        fake_openai: FakeOpenAI, answer: str) -> None:
    fake_openai.script(Reply.completion(WIFI_ANSWER))
    plain = backend(fake_openai).propose(make_ctx())
    fake_openai.script(Reply.completion(answer), Reply.completion(WIFI_ANSWER))
    with_llm = backend(fake_openai, llm_recommend=True).propose(make_ctx())

    assert len(fake_openai.requests) == 3
    assert prompt_text(fake_openai.requests[2]) == prompt_text(fake_openai.requests[0])
    assert with_llm.candidates == plain.candidates
    assert with_llm.action == plain.action and with_llm.error is None and with_llm.model_error is None
    assert with_llm.extra["llm_recommended"] == []


def test_a_failed_pathway_call_is_a_note_not_a_failed_step(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.error(400, "context too long"), Reply.completion(WIFI_ANSWER))
    proposal = backend(fake_openai, llm_recommend=True).propose(make_ctx())
    assert proposal.action is not None and proposal.model_error is None
    assert any("LLM recommendation failed" in note for note in proposal.extra["notes"])
    assert "About phone" not in prompt_text(fake_openai.requests[-1])


def test_the_pathway_never_sees_elements_that_already_failed(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.completion('{"ids": [2, 6]}'), Reply.completion(WIFI_ANSWER))
    proposal = backend(fake_openai, llm_recommend=True).propose(
        make_ctx(excluded_elements={ABOUT_KEY}))
    assert "About phone" not in prompt_text(fake_openai.requests[0])
    assert "About phone" not in prompt_text(fake_openai.requests[1])
    assert proposal.extra["llm_recommended"] == ["com.android.settings:id/bt_switch"]


def test_with_separate_planning_the_pathway_is_asked_about_the_current_step(
        fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        Reply.completion('{"plan": "1. Open About phone", "step": "Open About phone"}'),
        Reply.completion('{"ids": [6]}'),
        Reply.completion(WIFI_ANSWER),
    )
    backend(fake_openai, planning="separate", llm_recommend=True).propose(make_ctx())
    assert len(fake_openai.requests) == 3
    assert "Current step: Open About phone" in prompt_text(fake_openai.requests[1])


@pytest.mark.parametrize("value, enabled", [("1", True), ("true", True), ("0", False), ("", False)])
def test_the_pathway_is_switched_on_by_the_environment(fake_openai: FakeOpenAI, value: str,
                                                       enabled: bool) -> None:
    b = OpenAIBackend("m", base_url=fake_openai.base_url, api_key="k",
                      environ={"KAIROS_LLM_RECOMMEND": value})
    assert b.llm_recommend is enabled
    explicit = OpenAIBackend("m", base_url=fake_openai.base_url, api_key="k",
                             environ={"KAIROS_LLM_RECOMMEND": value}, llm_recommend=False)
    assert explicit.llm_recommend is False


@pytest.mark.parametrize("answer, expected", [
    ('{"ids": [12, 3]}', [12, 3]),
    ('{"relevant_ids": [3, 3, 12]}', [3, 12]),
    ('{"elements": [{"id": 3}, {"id": "#12"}]}', [3, 12]),
    ('```json\n["#3", 2, 99]\n```', [3, 2]),
    ("The Wi-Fi switch #1 and the list #12.", [1, 12]),
    ('{"ids": "3"}', [3]),
    ('{"ids": [true, 1.0, "x", -2]}', [1]),
    ("CLICK <point>[[870, 146]]</point>", []),
    ("garbage 3 5", []),
    (None, []),
    (12, []),
])
def test_element_ids_are_read_tolerantly(answer: Any, expected: list[int]) -> None:
    assert parse_element_ids(answer, {1, 2, 3, 12}) == expected
