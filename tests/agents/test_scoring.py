"""The action + score parser: every answer shape real endpoints produce, and garbage."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.brain import scoring
from agents.brain.scoring import (
    ParseError, ScoredAction, find_score_span, parse_clarification, parse_plan, parse_score,
    parse_scored_action,
)
from devices.actions import Action, Screen

SCREEN = Screen(1080, 2400)


def parsed(text: str) -> ScoredAction:
    result = parse_scored_action(text, SCREEN)
    assert isinstance(result, ScoredAction), result
    return result


@pytest.mark.parametrize("text", [
    "CLICK <point>[[500, 250]]</point>\nscore:4",
    "CLICK <point>[[500, 250]]</point>\nScore: 4",
    "CLICK <point>[[500,250]]</point> score: 4",
    "{action: CLICK <point>[[500, 250]]</point>, score: 4}",
    "{action: CLICK <point>[[500,250]]</point>, score:4}",
    '{"action": "CLICK <point>[[500, 250]]</point>", "score": 4}',
    "{'action': 'CLICK <point>[[500, 250]]</point>', 'score': '4'}",
    "Action: CLICK <point>[[500, 250]]</point> Score: 4",
    "Action: CLICK <point>[[500, 250]]</point>\nScore: 4",
    "action : click <point>[[500, 250]]</point>\nSCORE = 4",
    "**Action:** CLICK <point>[[500, 250]]</point>\n**Score:** 4",
    "```\nAction: CLICK <point>[[500, 250]]</point>\nScore: 4\n```",
    '```json\n{"action": "CLICK <point>[[500, 250]]</point>", "score": 4}\n```',
    '{"action": {"type": "CLICK", "x": 500, "y": 250}, "score": 4}',
    '{"type": "click", "point": [500, 250], "confidence": 4}',
    "Thought: the button is at the top.\nAction: tap <point>[[500, 250]]</point>\nConfidence: 4/5",
])
def test_it_reads_a_click_and_its_score_from_every_variant(text: str) -> None:
    result = parsed(text)
    assert result.action == Action("CLICK", x=540, y=600)
    assert result.score == 4.0
    assert result.notes == []


def test_it_reads_the_spaced_score_an_earlier_regex_missed() -> None:
    # `score:(\d+)` did not match "score: 4" and sent every step to a person.
    assert parsed("CLICK <point>[[1, 2]]</point>\nscore: 4").score == 4.0


def test_it_reads_plan_step_thought_action_and_score_from_the_template() -> None:
    text = (
        "Plan: 1. Open Settings 2. Tap Wi-Fi 3. Turn it on\n"
        "Step: Tap Wi-Fi\n"
        "Thought: Settings is open; Wi-Fi is the second row.\n"
        "Action: CLICK <point>[[500, 250]]</point>\n"
        "Score: 5"
    )
    result = parsed(text)
    assert result.plan == ["Open Settings", "Tap Wi-Fi", "Turn it on"]
    assert result.current_step == "Tap Wi-Fi"
    assert result.thought == "Settings is open; Wi-Fi is the second row."
    assert result.score == 5.0
    assert result.action_text == "CLICK <point>[[500, 250]]</point>"


def test_it_reads_a_multi_line_plan() -> None:
    result = parsed("Plan:\n1. Open Clock\n2. Tap Alarm\nStep: Open Clock\nAction: OPEN_APP [Clock]\nScore: 3")
    assert result.plan == ["Open Clock", "Tap Alarm"]
    assert result.action == Action("OPENAPP", app="Clock")


@pytest.mark.parametrize("text,action", [
    ("Action: TYPE [Shanghai shopping mall]\nScore: 3", Action("TYPE", text="Shanghai shopping mall")),
    ("Action: SCROLL [up]\nScore: 3", Action("SCROLL", direction="UP")),
    ("Action: OPEN_APP [Clock]\nScore: 3", Action("OPENAPP", app="Clock")),
    ("Action: PRESS_BACK\nScore: 3", Action("PRESS_BACK")),
    ("Action: ENTER\nScore: 3", Action("PRESS_ENTER")),
    ("{action: COMPLETE, score: 3}", Action("COMPLETE")),
    ("Action: LONG_PRESS <point>[[100, 100]]</point>\nScore: 3", Action("LONG_CLICK", x=108, y=240)),
    ("TYPE [hello, world] score: 3", Action("TYPE", text="hello, world")),
])
def test_it_reads_every_action_type(text: str, action: Action) -> None:
    result = parsed(text)
    assert result.action == action
    assert result.score == 3.0


def test_a_decimal_score_is_kept() -> None:
    assert parsed("Action: WAIT\nScore: 4.5").score == 4.5


def test_the_last_score_wins_over_an_echo_of_the_scale() -> None:
    text = "I give a score from 1 to 5.\nAction: WAIT\nScore: 2"
    assert parsed(text).score == 2.0


def test_a_missing_score_leaves_the_action_and_says_so() -> None:
    result = parsed("Action: PRESS_HOME")
    assert result.action == Action("PRESS_HOME")
    assert result.score is None
    assert result.notes == ["no score in the answer"]


def test_a_score_outside_one_to_five_is_refused_not_rescaled() -> None:
    result = parsed("Action: PRESS_HOME\nScore: 8")
    assert result.score is None
    assert result.notes == ["score 8 is outside 1–5"]


def test_prose_after_the_action_label_falls_back_to_the_action_line() -> None:
    result = parsed("Action: I will open the Wi-Fi page\nCLICK <point>[[500, 250]]</point>\nScore: 4")
    assert result.action == Action("CLICK", x=540, y=600)


@pytest.mark.parametrize("text,fragment", [
    ("", "empty"),
    ("   \n ", "empty"),
    ("I am not sure what to do here.", "no action"),
    ("Action: FLY [to the moon]\nScore: 4", "unknown action"),
    ("Action: CLICK <point>[[1500, 250]]</point>\nScore: 4", "outside 0–1000"),
    ("Action: CLICK\nScore: 4", "needs a point"),
    ("Action: CLICK somewhere\nScore: 4", "unknown action"),
    ("Action: TYPE []\nScore: 4", "non-empty"),
])
def test_unusable_answers_give_a_readable_parse_error(text: str, fragment: str) -> None:
    result = parse_scored_action(text, SCREEN)
    assert isinstance(result, ParseError)
    assert fragment in result.message


def test_non_text_input_is_a_parse_error() -> None:
    assert isinstance(parse_scored_action(None, SCREEN), ParseError)
    assert isinstance(parse_scored_action(b"CLICK", SCREEN), ParseError)


@pytest.mark.parametrize("text,score", [
    ("{score: 4}", 4.0),
    ("{score:2}", 2.0),
    ('{"score": 5}', 5.0),
    ("```\n{score: 3}\n```", 3.0),
    ("The student action is close. Score: 4", 4.0),
    ("3", 3.0),
])
def test_the_critic_score_is_read(text: str, score: float) -> None:
    assert parse_score(text) == score


@pytest.mark.parametrize("text", ["{score: }", "no idea", "{score: 9}", ""])
def test_an_unusable_critic_score_is_a_parse_error(text: str) -> None:
    assert isinstance(parse_score(text), ParseError)


def test_find_score_span_points_at_the_digits() -> None:
    text = "Action: WAIT\nScore: 4"
    span = find_score_span(text)
    assert span is not None and text[span[0]: span[1]] == "4"
    assert find_score_span("no score here") is None


def test_the_dpot_plan_dictionary_is_read_with_single_quotes() -> None:
    text = "{'plan': '1. Open Settings 2. Tap Network', 'step': 'Open Settings'}"
    assert parse_plan(text) == (["Open Settings", "Tap Network"], "Open Settings")


def test_a_json_plan_is_read() -> None:
    assert parse_plan('```json\n{"plan": ["a", "b"], "step": "a"}\n```') == (["a", "b"], "a")
    assert isinstance(parse_plan("nothing"), ParseError)


def test_the_recagent_clarification_verdict_is_read() -> None:
    yes = parse_clarification('{"need_clarification": true, "clarification_question": "Which alarm?"}')
    assert yes == scoring.ClarificationRequest(True, "Which alarm?")
    no = parse_clarification('{"need_clarification": false, "clarification_question": ""}')
    assert no is not None and not no.need
    # Asking nothing is not a question a user can answer.
    empty = parse_clarification('{"need_clarification": true, "clarification_question": ""}')
    assert empty is not None and not empty.need
    assert parse_clarification("Action: WAIT\nScore: 3") is None
    broken = parse_clarification('need_clarification: true, "clarification_question": "Which one?"')
    assert broken == scoring.ClarificationRequest(True, "Which one?")


# --- property: any string → an action or a clear parse error, never an exception ------

_FRAGMENTS = st.sampled_from([
    "Action:", "action", "Score:", "score:", "score", "{", "}", "[[", "]]", "<point>", "</point>",
    "CLICK", "TYPE [", "SCROLL", "OPEN_APP", "```", "```json", "\n", ",", ":", "'", '"',
    "need_clarification", "Plan:", "Step:", "1.", "4", "5", "9999999999", "-1", "1e309",
    "{'action': ", '"score": ', "\\", "None", "true", "0.5", "\x00", "é", "💥",
])
_TEXTS = st.one_of(st.text(max_size=300), st.lists(_FRAGMENTS | st.text(max_size=8), max_size=40).map("".join))


@settings(max_examples=400, deadline=None)
@given(_TEXTS)
def test_any_string_parses_to_an_action_or_a_parse_error(text: str) -> None:
    result = scoring._parse(text, SCREEN)  # the unguarded parser: no bug is masked
    assert isinstance(result, (ScoredAction, ParseError))
    if isinstance(result, ScoredAction):
        assert result.score is None or 1.0 <= result.score <= 5.0
        if result.action.x is not None:
            assert 0 <= result.action.x < SCREEN.width and 0 <= result.action.y < SCREEN.height
    else:
        assert result.message


@settings(max_examples=200, deadline=None)
@given(_TEXTS)
def test_the_other_parsers_never_raise(text: str) -> None:
    score = parse_score(text)
    assert isinstance(score, (float, ParseError))
    assert isinstance(parse_plan(text), (tuple, ParseError))
    assert parse_clarification(text) is None or isinstance(parse_clarification(text), scoring.ClarificationRequest)
    assert find_score_span(text) is None or isinstance(find_score_span(text), tuple)
