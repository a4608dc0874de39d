"""The gate's guards (agents/brain/loop.py) on hand-built screens."""
from __future__ import annotations

from agents.brain import loop
from agents.brain.backends.base import Proposal
from devices.actions import Action
from tests.agents.screens import ScreenBuilder, ctx, entry


def _error_screen():
    s = ScreenBuilder("com.kairos.shop")
    s.text("No connection", 600)
    s.button("Retry", 800)
    return s.observation()


def test_the_same_tap_after_it_changed_nothing_goes_to_a_person():
    obs = _error_screen()
    ok = next(n for n in obs.nodes if n.label == "No connection")
    tap = Action("CLICK", x=ok.center[0], y=ok.center[1])
    history = [entry(1, tap.to_json(), changed=False)]
    decision = loop.decide(Proposal(tap, confidence=5), ctx("Buy shoes", obs, history=history), 4)
    assert decision.outcome == loop.TICKET and decision.reason == loop.REPEATED_FAILURE


def test_retry_and_wait_may_repeat_a_few_times_before_a_person_is_asked():
    obs = _error_screen()
    retry = next(n for n in obs.nodes if n.label == "Retry")
    tap = Action("CLICK", x=retry.center[0], y=retry.center[1])
    for action in (tap, Action("WAIT")):
        twice = [entry(i, action.to_json(), changed=False) for i in (1, 2)]
        decision = loop.decide(Proposal(action, confidence=5), ctx("Buy", obs, history=twice), 4)
        assert decision.outcome == loop.EXECUTE
        thrice = [entry(i, action.to_json(), changed=False) for i in (1, 2, 3)]
        decision = loop.decide(Proposal(action, confidence=5), ctx("Buy", obs, history=thrice), 4)
        assert decision.reason == loop.REPEATED_FAILURE


def test_a_retry_that_changed_nothing_is_not_excluded_but_another_tap_is():
    obs = _error_screen()
    retry = next(n for n in obs.nodes if n.label == "Retry")
    text = next(n for n in obs.nodes if n.label == "No connection")
    excluded: set[str] = set()
    loop.reflect(Action("CLICK", x=retry.center[0], y=retry.center[1]), False, retry, excluded)
    assert excluded == set()
    loop.reflect(Action("CLICK", x=text.center[0], y=text.center[1]), False, text, excluded)
    assert excluded == {text.key}
