"""What production records teaches the memory (issue 25; LEARNING lessons 3, 5 and 7).

Pure Python. Only outcomes checked outside the agent teach it: a person's decision on a
ticket (approve; edit; take-over), the end user's verdict on a task, a spot check. The
agent's own "finished" never does.

* approve — the proposal is confirmed on this screen for this instruction;
* edit / take-over — the person's action is confirmed; the proposal, where there was one
  and it differs, is recorded as corrected. An edit or take-over that repeats the
  proposal exactly confirms it;
* verdict / spot check — see :func:`learn_from_verdict`, the one place where end users'
  verdicts (``Task.verdict_right``) and spot-check tickets feed in.

Every judged proposal that came from memory also adds to its kind's record (right or
wrong), which is what the calibrator reads.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from agents.brain.experience.memory import (
    CONFIRM, CONTRADICT, Episode, Store, remember, screen_summary,
)
from devices.actions import COMPLETE, IMPOSSIBLE, Action
from devices.uitree import UINode

APPROVE = "approve"
EDIT = "edit"
TAKEOVER = "takeover"
ALONE = "alone"
LAUNCHER = "com.android.launcher3"


@dataclass
class StepFact:
    """One step as production records it: the screen it was decided on, the instruction,
    what the agent proposed, what was executed, and who decided."""

    app: str
    nodes: list[UINode]
    instruction: str
    proposed: Action | None
    executed: Action | None
    decision: str  # approve | edit | takeover | alone
    memory_kind: str | None = None  # the proposal came from memory of this kind
    summary: str = ""  # the executed step in words ("CLICK 'Save goal'")
    prev: str = ""  # memory.step_key of the step before it in the episode


def learn_from_ticket(store: Store, fact: StepFact, task: str = "") -> None:
    """A person decided a ticket about ``fact``."""
    if fact.executed is None:
        return
    where = dict(app=fact.app, nodes=fact.nodes, instruction=fact.instruction, task=task,
                 prev=fact.prev)
    decision = fact.decision
    same = fact.proposed is not None and fact.proposed.same_as(fact.executed)
    if decision in (EDIT, TAKEOVER) and same:
        decision = APPROVE  # an identical edit or a take-over that repeats the proposal
    if decision == APPROVE:
        remember(store, action=fact.executed, polarity=CONFIRM, source="approve", **where)
        if fact.memory_kind:
            store.add_outcome(fact.memory_kind, True)
        return
    if decision not in (EDIT, TAKEOVER):
        raise ValueError(f"not a ticket decision: {decision!r}")
    remember(store, action=fact.executed, polarity=CONFIRM, source=decision, **where)
    if fact.proposed is not None:
        remember(store, action=fact.proposed, polarity=CONTRADICT, source=decision, **where)
    if fact.memory_kind:
        store.add_outcome(fact.memory_kind, False)


def learn_from_verdict(store: Store, alone: Iterable[StepFact], right: bool, *,
                       task: str = "", source: str = "verdict") -> int:
    """THE hook for end users' verdicts and spot checks (issue 25 item 1; the verdict and
    spot-check tickets of the issue "Labels you can trust and measure").

    ``alone``: the steps that acted without a person — all of a task's for an end user's
    verdict on the task (``source="verdict"``), the one sampled step for a spot check
    (``source="spot_check"``). ``right``: the verdict. A right verdict confirms each step
    on its screen; a wrong one corrects only the steps that came from memory (which of
    the others went wrong is unknown) and counts against their kind. Returns the entries
    written."""
    written = 0
    for fact in alone:
        if fact.executed is None or fact.executed.type == IMPOSSIBLE:
            continue
        if right:
            if remember(store, app=fact.app, nodes=fact.nodes, instruction=fact.instruction,
                        action=fact.executed, polarity=CONFIRM, source=source, task=task,
                        prev=fact.prev):
                written += 1
            if fact.memory_kind:
                store.add_outcome(fact.memory_kind, True)
        elif fact.memory_kind:
            if remember(store, app=fact.app, nodes=fact.nodes, instruction=fact.instruction,
                        action=fact.executed, polarity=CONTRADICT, source=source, task=task,
                        prev=fact.prev):
                written += 1
            store.add_outcome(fact.memory_kind, False)
    return written


def record_episode(store: Store, instruction: str, facts: list[StepFact]) -> Episode | None:
    """A task its end user confirmed, as a reference episode for planners (D-PoT §5.5)."""
    steps = [f for f in facts if f.executed is not None]
    if not steps:
        return None
    app = next((f.app for f in steps if f.app and f.app != LAUNCHER), steps[0].app)
    actions = tuple(f.summary or f.executed.describe() for f in steps
                    if f.executed.type != COMPLETE)
    episode = Episode(app=app, goal=instruction, start=screen_summary(steps[0].nodes),
                      actions=actions)
    store.add_episode(episode)
    return episode


@dataclass
class TaskLearning:
    """One task's row of ``evaluate --learn``'s ``learning`` list."""

    task: str
    steps: int = 0  # judged steps
    asked: int = 0
    alone_wrong: int = 0
    success: bool | None = None
    facts: list[StepFact] = field(default_factory=list)
    memory: list[dict] = field(default_factory=list)  # judged memory proposals

    def to_json(self) -> dict:
        return {"task": self.task, "steps": self.steps, "asked": self.asked,
                "alone_wrong": self.alone_wrong, "success": self.success}
