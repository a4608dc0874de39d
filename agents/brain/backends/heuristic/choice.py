"""What a rule decides, and how sure it is.

Every rule returns a :class:`Choice` — the action, a 1–5 confidence, the reason — or
None to pass. The confidence is evidence-based (OS-Kairos §4.2, Eq. 4): 4 and 5 are kept
for steps the rules have direct evidence for, because the product acts alone from γ = 4.
:func:`step_evidence` states why, as features the calibrator reads (issue 12).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from agents.brain.backends.base import StepContext
from agents.brain.backends.evidence import context_evidence
from agents.brain.backends.heuristic.intents import Intent
from agents.brain.backends.heuristic.screen import ScreenView
from devices.actions import Action


def match_confidence(best: float, runner_up: float) -> float:
    """Confidence 1–5 from the best element's match score and its margin.

    5 — a strong, unique match; 4 — a clear match with a clear margin; 3 — a plausible
    match; 2 — a weak one or two candidates alike; 1 — nothing matches.
    """
    margin = best - runner_up
    if best >= 0.8 and margin >= 0.3:
        return 5.0
    if best >= 0.6 and margin >= 0.2:
        return 4.0
    if best >= 0.45 and margin >= 0.1:
        return 3.0
    if best > 0.2:
        return 2.0
    return 1.0


@dataclass
class Choice:
    action: Action
    confidence: float
    thought: str
    candidates: list[str] = field(default_factory=list)
    # Evidence for the calibrator: the decision rule that fired is the backend method
    # that built this choice (``toggle``, ``click_best`` …), recorded here so that
    # every one of the rules states it without each call site naming itself.
    rule: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.rule:
            self.rule = sys._getframe(2).f_code.co_name.lstrip("_")  # 1 is __init__

    def matched(self, best: float, runner_up: float, candidates: int = 0) -> "Choice":
        """Record the element match behind this choice: strength, margin over the
        runner-up and how many elements fitted at all."""
        self.evidence.update(strength=round(best, 4), margin=round(best - runner_up, 4))
        if candidates:
            self.evidence["fitting"] = candidates
        return self


def step_evidence(choice: Choice, ctx: StepContext, view: ScreenView, plan: list[str],
                  intents: list[Intent]) -> dict[str, Any]:
    """Why the heuristic is sure of ``choice`` (issue 12), for the calibrator: the rule
    that fired with its raw 1–5 score, the element match behind it, what is on screen,
    and the context every backend states (:func:`context_evidence`)."""
    evidence = context_evidence(choice.action, ctx)
    evidence.update(rule=choice.rule, raw=float(choice.confidence))
    evidence.update(choice.evidence)
    evidence["sub_goals"] = min(len(plan), 4)
    evidence["overlay"] = view.overlay_kind or "none"
    evidence["launcher"] = view.launcher
    evidence["open_choices"] = sum(1 for g in view.groups if g.checked is None)
    evidence["targets"] = min(len(view.candidates), 30)
    return evidence
