"""The action space: canonical JSON and the OS-Atlas text form, both ways, and validation."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from devices.actions import (
    ACTION_TYPES, MAX_TEXT_LENGTH, Action, ActionError, InvalidAction, action_from_text,
    action_to_text, parse_action, validate_action,
)

SCREEN = (1080, 2400)


@pytest.mark.parametrize("data", [
    {"type": "CLICK", "x": 540, "y": 1200},
    {"type": "LONG_CLICK", "x": 0, "y": 2399, "element": "com.app:id/row"},
    {"type": "TYPE", "text": "Shanghai shopping mall"},
    {"type": "SCROLL", "direction": "UP"},
    {"type": "OPENAPP", "app": "Clock"},
    {"type": "PRESS_BACK"}, {"type": "PRESS_HOME"}, {"type": "PRESS_ENTER"},
    {"type": "WAIT"}, {"type": "COMPLETE"}, {"type": "IMPOSSIBLE"},
])
def test_every_action_round_trips_through_json(data):
    action = validate_action(data, SCREEN)
    assert isinstance(action, Action)
    assert action.to_json() == data


@pytest.mark.parametrize("data, field, fragment", [
    ({"type": "SWIPE_LEFT"}, "type", "unknown action type 'SWIPE_LEFT'"),
    ({}, "type", "no 'type'"),
    ("CLICK", None, "JSON object"),
    ({"type": "CLICK", "y": 10}, "x", "needs an integer 'x'"),
    ({"type": "CLICK", "x": "left", "y": 10}, "x", "needs an integer 'x'"),
    ({"type": "CLICK", "x": 1080, "y": 10}, "x", "off the 1080x2400 screen"),
    ({"type": "LONG_CLICK", "x": 10, "y": -1}, "y", "off the screen"),
    ({"type": "TYPE", "text": "   "}, "text", "non-empty"),
    ({"type": "TYPE"}, "text", "needs a 'text'"),
    ({"type": "TYPE", "text": "x" * (MAX_TEXT_LENGTH + 1)}, "text", "at most 1000"),
    ({"type": "SCROLL", "direction": "SIDEWAYS"}, "direction", "the way the finger moves"),
    ({"type": "OPENAPP", "app": ""}, "app", "non-empty 'app'"),
    ({"type": "WAIT", "element": 7}, "element", "'element' must be a string"),
])
def test_invalid_actions_get_a_clear_error_and_never_raise(data, field, fragment):
    result = validate_action(data, SCREEN)
    assert isinstance(result, ActionError)
    assert result.field == field
    assert fragment in result.message


def test_parse_action_raises_with_the_same_message():
    with pytest.raises(InvalidAction, match="unknown action type"):
        parse_action({"type": "FLY"})


def test_aliases_from_models_and_datasets_map_to_the_canonical_type():
    assert validate_action({"type": "tap", "x": 1, "y": 2}).type == "CLICK"
    assert validate_action({"type": "open_app", "app": "Maps"}).type == "OPENAPP"
    assert validate_action({"type": "scroll", "direction": "down"}).direction == "DOWN"


@pytest.mark.parametrize("text, expected", [
    ("CLICK <point>[[500, 500]]</point>", {"type": "CLICK", "x": 540, "y": 1200}),
    ("click <point>[[0,1000]]</point>", {"type": "CLICK", "x": 0, "y": 2399}),
    ("LONG_PRESS <point>[[250, 750]]</point>", {"type": "LONG_CLICK", "x": 270, "y": 1800}),
    ("TYPE [Shanghai shopping mall]", {"type": "TYPE", "text": "Shanghai shopping mall"}),
    ("SCROLL [UP]", {"type": "SCROLL", "direction": "UP"}),
    ("OPEN_APP [Clock]", {"type": "OPENAPP", "app": "Clock"}),
    ("`PRESS_BACK`", {"type": "PRESS_BACK"}),
    ("ENTER", {"type": "PRESS_ENTER"}),
    ("COMPLETE", {"type": "COMPLETE"}),
])
def test_the_os_atlas_text_form_is_read_in_device_pixels(text, expected):
    assert action_from_text(text, SCREEN).to_json() == expected


@pytest.mark.parametrize("text, fragment", [
    ("", "empty"), ("CLICK", "needs a point"), ("CLICK <point>[[1200, 5]]</point>", "0–1000"),
    ("JUMP [high]", "unknown action"), ("SCROLL [DIAGONAL]", "finger"), ("TYPE []", "non-empty"),
])
def test_bad_action_text_gets_a_clear_error(text, fragment):
    result = action_from_text(text, SCREEN)
    assert isinstance(result, ActionError) and fragment in result.message


@given(x=st.integers(0, 1079), y=st.integers(0, 2399),
       kind=st.sampled_from(["CLICK", "LONG_CLICK"]))
def test_a_point_survives_text_and_back_within_the_0_1000_grid(x, y, kind):
    action = Action(kind, x=x, y=y)
    back = action_from_text(action_to_text(action, SCREEN), SCREEN)
    assert back.type == kind
    # One step of the 0–1000 grid is 1.08 px wide and 2.4 px tall.
    assert abs(back.x - x) <= 1 and abs(back.y - y) <= 2


@given(st.text(max_size=200))
def test_any_text_gives_an_action_or_an_error_never_an_exception(text):
    result = action_from_text(text, SCREEN)
    assert isinstance(result, (Action, ActionError))


def test_every_type_has_a_text_form_that_reads_back():
    samples = {"CLICK": {"x": 10, "y": 10}, "LONG_CLICK": {"x": 10, "y": 10},
               "TYPE": {"text": "hi"}, "SCROLL": {"direction": "LEFT"}, "OPENAPP": {"app": "Shop"}}
    for kind in ACTION_TYPES:
        action = validate_action({"type": kind, **samples.get(kind, {})}, SCREEN)
        assert action_from_text(action_to_text(action, SCREEN), SCREEN).type == kind


@pytest.mark.parametrize("value", ["inf", "1e400", "-Infinity", "9" * 400, "nan",
                                   float("inf"), 10 ** 400, -(10 ** 30)])
def test_an_infinite_or_huge_coordinate_is_refused_not_an_overflow(value):
    result = validate_action({"type": "CLICK", "x": value, "y": 5}, (1080, 2400))
    assert isinstance(result, ActionError) and result.field == "x"
    assert len(result.message) < 200  # a huge number is not echoed back in full


@pytest.mark.parametrize("field, data", [
    ("text", {"type": "TYPE", "text": "a\x00b"}),
    ("text", {"type": "TYPE", "text": "a\ud800b"}),
    ("app", {"type": "OPENAPP", "app": "Clock\x00"}),
    ("element", {"type": "PRESS_BACK", "element": "\udfff"}),
])
def test_text_with_a_nul_byte_or_a_lone_surrogate_is_refused(field, data):
    result = validate_action(data)
    assert isinstance(result, ActionError) and result.field == field
    assert "NUL" in result.message or "surrogate" in result.message


def test_a_field_of_another_type_is_ignored_but_must_be_well_formed():
    assert validate_action({"type": "TYPE", "text": "hi", "x": "", "app": None}) == \
        Action("TYPE", text="hi")
    for bad, field in (({"type": "TYPE", "text": "hi", "x": "abc"}, "x"),
                       ({"type": "PRESS_BACK", "app": {}}, "app"),
                       ({"type": "PRESS_BACK", "direction": 3}, "direction")):
        result = validate_action(bad)
        assert isinstance(result, ActionError) and result.field == field
