"""The interface every agent backend implements (heuristic, openai, oracle).

Pure Python. A backend sees the instruction, the refined goal (clarification answers),
the current observation and a compact history — never task ids, gold paths or an oracle
(the ``oracle`` evaluation backend is the one documented exception, and only on
simulated suites).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from devices.actions import Action
from devices.protocol import AppInfo, Observation

MIN_CONFIDENCE = 1.0
MAX_CONFIDENCE = 5.0


@dataclass(frozen=True)
class HistoryEntry:
    """One executed step, as the compact D-PoT history shows it ("step i: action")."""

    index: int
    action: dict[str, Any]
    by: str = "agent"  # "agent" | "operator"
    summary: str = ""  # plain-words description, e.g. "CLICK 'Wi-Fi' at (540, 600)"
    screen_changed: bool = True
    # the tap picked one of several siblings: their group ("RadioButton:pl_day_group"),
    # else "" (agents.brain.experience.memory.pick_group)
    pick: str = ""


@dataclass
class StepContext:
    instruction: str
    observation: Observation
    history: list[HistoryEntry] = field(default_factory=list)
    # Answers to clarification questions, in order (RecAgent Eq. 6: the refined goal).
    answers: list[str] = field(default_factory=list)
    # Element keys that failed earlier in the episode (RecAgent 3.5 retrospection).
    excluded_elements: set[str] = field(default_factory=set)
    apps: tuple[AppInfo, ...] = ()
    # Goals of earlier successful tasks most similar to this one (D-PoT references).
    references: list[str] = field(default_factory=list)
    # Questions already asked in this episode (the same information is never asked twice).
    asked: list[str] = field(default_factory=list)
    step_index: int = 0
    # The most similar earlier episodes people verified, each {"goal", "start",
    # "actions"} (D-PoT §5.5; filled by agents.brain.experience.layer, shown by planners).
    experience: list[dict[str, Any]] = field(default_factory=list)
    # Earlier steps of this episode observed on this very screen since a person last
    # decided (the no-progress guard, agents/brain/loop.py).
    screen_visits: int = 0

    @property
    def goal(self) -> str:
        """The instruction refined by every answer the user gave."""
        if not self.answers:
            return self.instruction
        return self.instruction + " (" + "; ".join(self.answers) + ")"


@dataclass
class Clarification:
    """A question for the task's owner (RecAgent App. D ``clarification_question``)."""

    question: str
    options: list[str] = field(default_factory=list)
    # What the question is about: "intent" — what the user wants, theirs alone to say
    # (RecAgent §3.6) — or "route": where to do it ("which app?"), which an installation's
    # people may have shown the agent before (agents/brain/experience/layer.py).
    about: str = "intent"


@dataclass
class Proposal:
    """What a backend proposes for one step.

    Either ``action`` is set, or ``error`` says why the output could not be used (a
    ``parse_error`` ticket), or ``clarification`` asks the user first.
    """

    action: Action | None
    confidence: float | None = None  # 1–5 (OS-Kairos Eq. 3 score)
    thought: str = ""
    plan: list[str] = field(default_factory=list)
    current_step: str = ""
    raw: str = ""  # the model's raw output
    error: str | None = None  # parse error
    model_error: str | None = None  # endpoint failure after retries
    clarification: Clarification | None = None
    candidates: list[str] = field(default_factory=list)  # recommended element keys
    prompt_tokens: int = 0
    completion_tokens: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    # Why the backend is sure, as features a calibrator reads (issue 12; DESIGN
    # "Confidence is measured, not asserted"): flat names → numbers, booleans or short
    # category strings, e.g. {"rule": "toggle", "strength": 0.92, "margin": 0.4}. The
    # keys each backend states are listed in docs/models.md ("Evidence").
    evidence: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    """A backend may also set ``needs_ui_tree = True`` when it cannot act on a screenshot
    alone (the heuristic reads only UI nodes): dataset replay then reports the steps
    that have no UI tree as not scored instead of inventing one (:func:`needs_ui_tree`)."""

    name: str

    def propose(self, ctx: StepContext) -> Proposal:
        """Propose the next action with a confidence. Must not raise."""


def needs_ui_tree(backend: Any) -> bool:
    """Can ``backend`` act only with a UI tree (not on a screenshot alone)?"""
    return bool(getattr(backend, "needs_ui_tree", False))


def clamp_confidence(value: float) -> float:
    return max(MIN_CONFIDENCE, min(MAX_CONFIDENCE, float(value)))
