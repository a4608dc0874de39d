"""The ``oracle`` backend: the simulator's optimal next action, with confidence 5.

**Evaluation only.** It reads the suite task's success predicate and hidden preference
through :class:`devices.sim.oracle.Oracle`, which no real agent can know; it exists as the
reference upper bound of ``evaluate`` on simulated suites (CONTRACT: backends) and is
never offered for real phones.
"""
from __future__ import annotations

from typing import Any

from agents.brain.backends.base import MAX_CONFIDENCE, Proposal, StepContext
from devices.actions import COMPLETE, IMPOSSIBLE, Action


class OracleBackend:
    name = "oracle"

    def __init__(self, device: Any, task: Any, max_states: int | None = None):
        from devices.sim.oracle import DEFAULT_MAX_STATES, Oracle  # the simulator is optional

        self.device = device
        self.task = task
        # The same budget as the evaluation's judging oracle, so both share one search.
        self.oracle = Oracle(device, task, max_states=max_states or DEFAULT_MAX_STATES)

    def propose(self, ctx: StepContext) -> Proposal:
        """The first optimal action from the device's current state; COMPLETE when the
        predicate holds; IMPOSSIBLE when no path exists. Never raises."""
        from devices.sim.oracle import NoPathError

        try:
            if self.device.check(self.task):
                return Proposal(action=Action(COMPLETE), confidence=MAX_CONFIDENCE,
                                thought="The task's success condition holds.")
            choices = self.oracle.next_actions(self.device.snapshot())
            distance = self.oracle.distance(self.device.snapshot())
        except NoPathError as exc:
            return Proposal(action=Action(IMPOSSIBLE), confidence=MAX_CONFIDENCE, thought=str(exc))
        except Exception as exc:  # the loop must keep going; report instead of raising
            return Proposal(action=None, model_error=f"oracle failed: {exc!r}")
        action = choices[0]
        return Proposal(
            action=action, confidence=MAX_CONFIDENCE,
            thought=f"Optimal: {distance} action(s) to success; next {action.describe()}.",
            current_step=action.describe(), raw=action.describe(),
        )
