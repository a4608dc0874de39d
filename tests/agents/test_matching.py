"""StaR App. A.2 action matching."""
from __future__ import annotations

import pytest

from agents.brain.matching import (
    GoldAction, actions_match, app_names_match, normalise_text, point_distance, stem,
)
from devices.actions import Action, Screen

# A 1000 x 2000 screen: 1% of the width is 10 px, 1% of the height is 20 px.
SCREEN = Screen(1000, 2000)


def click(x: int, y: int) -> Action:
    return Action("CLICK", x=x, y=y)


def test_click_inside_the_gold_box_matches_however_far_from_the_gold_point() -> None:
    # A wide list row: the gold point is at its left end, the prediction at its right end.
    gold = GoldAction(click(100, 1000), bbox=(0, 950, 1000, 1050))
    assert point_distance((950, 1000), (100, 1000), SCREEN) == pytest.approx(0.85)
    assert actions_match(click(950, 1000), gold, screen=SCREEN) == (True, True)


def test_click_near_the_gold_point_but_outside_its_box_matches_by_distance() -> None:
    gold = GoldAction(click(100, 1000), bbox=(90, 990, 110, 1010))
    # 10% of the width away: outside the box, within 14%.
    assert actions_match(click(200, 1000), gold, screen=SCREEN) == (True, True)


def test_toggles_use_four_percent_and_others_fourteen() -> None:
    gold = GoldAction(click(500, 1000))
    five_percent = click(500, 1100)  # 100 px of a 2000 px height
    assert actions_match(five_percent, gold, screen=SCREEN, toggle=False) == (True, True)
    assert actions_match(five_percent, gold, screen=SCREEN, toggle=True) == (True, False)
    three_percent = click(530, 1000)
    assert actions_match(three_percent, gold, screen=SCREEN, toggle=True) == (True, True)
    exactly_four = click(540, 1000)
    assert actions_match(exactly_four, gold, screen=SCREEN, toggle=True) == (True, True)


def test_click_far_and_outside_the_box_does_not_match_but_its_type_does() -> None:
    gold = GoldAction(click(500, 1000), bbox=(450, 950, 550, 1050))
    assert actions_match(click(500, 1400), gold, screen=SCREEN) == (True, False)  # 20%


def test_distance_is_normalised_per_axis() -> None:
    # 200 px down is 10% of the height, 100 px across is 10% of the width.
    assert point_distance((0, 200), (0, 0), SCREEN) == pytest.approx(0.1)
    assert point_distance((100, 0), (0, 0), SCREEN) == pytest.approx(0.1)


def test_type_text_is_lower_cased_and_trimmed() -> None:
    gold = Action("TYPE", text="Coffee shops near me")
    assert actions_match(Action("TYPE", text="  coffee SHOPS near me \n"), gold,
                         screen=SCREEN) == (True, True)
    assert actions_match(Action("TYPE", text="coffee shops"), gold,
                         screen=SCREEN) == (True, False)
    assert normalise_text("  Hi ") == "hi"


@pytest.mark.parametrize("pred, gold", [
    ("Clock", "clock"),
    ("Voice Recorder", "voice recorder-unrecorder"),  # the paper's own example
    ("Flipsnack", "open the flipsnack magazine app"),
    ("Settings", "setting"),
    ("Google Photos", "photo"),
])
def test_openapp_names_match_by_stemmed_substring(pred: str, gold: str) -> None:
    assert app_names_match(pred, gold)
    assert actions_match(Action("OPENAPP", app=pred), Action("OPENAPP", app=gold),
                         screen=SCREEN) == (True, True)


def test_openapp_different_apps_do_not_match() -> None:
    assert actions_match(Action("OPENAPP", app="Chrome"), Action("OPENAPP", app="Clock"),
                         screen=SCREEN) == (True, False)


def test_stemmer_folds_tense_person_and_plurals() -> None:
    assert stem("opened") == stem("opens") == stem("opening") == "open"
    assert stem("messages") == stem("message")
    assert stem("galleries") == "gallery"
    assert stem("recorders") == stem("recorder") == "record"
    assert stem("class") == "class"
    assert stem("bus") == "bus"  # never below three letters


def test_scroll_direction_must_match() -> None:
    gold = Action("SCROLL", direction="UP")
    assert actions_match(Action("SCROLL", direction="UP"), gold, screen=SCREEN) == (True, True)
    assert actions_match(Action("SCROLL", direction="DOWN"), gold,
                         screen=SCREEN) == (True, False)


def test_other_types_match_on_type_alone() -> None:
    assert actions_match(Action("PRESS_BACK"), Action("PRESS_BACK"),
                         screen=SCREEN) == (True, True)
    assert actions_match(Action("COMPLETE"), GoldAction(Action("COMPLETE")),
                         screen=SCREEN) == (True, True)


def test_a_different_type_or_no_prediction_matches_nothing() -> None:
    gold = GoldAction(click(500, 1000), bbox=(0, 0, 1000, 2000))
    assert actions_match(Action("LONG_CLICK", x=500, y=1000), gold,
                         screen=SCREEN) == (False, False)
    assert actions_match(None, gold, screen=SCREEN) == (False, False)
    assert actions_match(Action("COMPLETE"), gold, screen=SCREEN) == (False, False)


def test_screen_may_be_a_width_height_pair() -> None:
    gold = GoldAction(click(100, 100))
    assert actions_match(click(110, 100), gold, screen=(1000, 2000)) == (True, True)
