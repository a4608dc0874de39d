"""The in-memory episode runner labels every proposal with the oracle."""
from __future__ import annotations

from agents.brain.backends.base import Proposal
from agents.evaluation.episode import run_episode
from devices.actions import Action
from devices.sim import SimDevice, find_suite


class Always:
    """Proposes one fixed action forever, sure of itself."""

    name = "always"

    def __init__(self, action: Action):
        self.action = action

    def propose(self, ctx):
        return Proposal(self.action, confidence=5.0)


def first_step(backend, threshold=0.0):
    suite = find_suite("toggles")
    task = suite.tasks[0]
    device = SimDevice("episode-test", apps=suite.bundle)
    return run_episode(device, backend, task, threshold=threshold, max_steps=1).steps[0]


def test_a_wrong_tap_is_needed_but_has_the_right_type():
    step = first_step(Always(Action("CLICK", x=5, y=2390)))
    assert step.needed is True and step.asked is False
    assert step.type_match is True


def test_a_wrong_kind_of_action_misses_the_type_too():
    step = first_step(Always(Action("PRESS_BACK")))
    assert step.needed is True and step.type_match is False


def test_an_asked_step_is_resolved_by_the_oracle_operator():
    step = first_step(Always(Action("PRESS_BACK")), threshold=5.1)
    assert step.asked is True and step.by == "operator"
    assert step.executed != {"type": "PRESS_BACK"}
